#!/usr/bin/env python3
"""Stack sources against the domains they render to (issues #33 and #37): CPU ratios and start-up.

    .venv/bin/python bench/stacks.py [--python /tmp/perf-venv/bin/python] [--rounds 5] [--count 1000] [--quick]

Targets, each printed with its measured value and whether it is met:
- KubeVirt against kubeconform (issue #45), on the same COUNT manifests, kubeconform validating
  them against KubeVirt's own schema (fixtures/stacks/kubevirt/schema/kubevirt-openapi.json,
  written as one standalone JSON schema per kind, `{kind}_{version}.json`, the layout of
  kubeconform's `-schema-location '.../{{ .ResourceKind }}_{{ .ResourceAPIVersion }}.json'`;
  not -strict: the swagger's objects allow unknown fields, as virt-api's check does):
  CPU of `vmtune check -j 1` <= 1.0x `kubeconform -n 1 -summary`, and wall of vmtune at its
  default -j <= 1.0x kubeconform at its default -n. kubeconform is looked for on PATH and in
  ~/go/bin (`go install github.com/yannh/kubeconform/cmd/kubeconform@latest`); absent, a line
  says so and its ratios are not measured. kube-linter (`kube-linter lint DIR`), when present,
  is printed without a target;
- KubeVirt: `vmtune check --isolated -j 1 MANIFESTS/` costs at most 1.5x the CPU of
  `vmtune check --isolated -j 1 XMLS/`, where XMLS holds the domain XML vmtune's renderer writes
  for each manifest (vmtune.stacks.kubevirt.frontend.render -> Rendered.xml): the price of
  reading YAML, rendering and placing findings back, over checking the same domains;
- KubeVirt: `vmtune check --isolated one.yaml` starts within 1.3x of
  `python -c 'import lxml.etree, yaml'`;
- OpenStack (when the install measured has vmtune.stacks.openstack): a listing of COUNT flavors
  (`openstack flavor list --long -f json`'s shape) and one image, which the front end checks as
  every pair, within 1.3x of the COUNT domains it renders for them (issue #45).

--quick: 3 rounds (the default is 5); the whole run takes about two minutes on 2 idle cores.

The corpus is deterministic: variants of fixtures/stacks/kubevirt/oracle/*.yaml and
fixtures/stacks/kubevirt/dump/*.yaml (names, core counts, multiqueue, rng and memory balloon
varied by the variant's number), keeping only sources that render exactly one domain, so the
two directories hold the same domains. It is written outside any git work tree (default
$TMPDIR/vmtune-bench), since vmtune skips git-ignored files.

The corpus is rendered by the install given by --python (a `pip install .`, not -e: an editable
install adds ~47 ms of import hooks to every start), which the timed commands run too. Runs
are interleaved (A B C A B C ...), figures are medians and ratios the median of the ratios
within a round (bench/_common.py).
"""

from __future__ import annotations

import argparse
import copy
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from _common import ROOT, interleave, load, machine

SOURCES = sorted([*(ROOT / "fixtures" / "stacks" / "kubevirt" / "oracle").glob("*.yaml"),
                  *(ROOT / "fixtures" / "stacks" / "kubevirt" / "dump").glob("*.yaml")])
CORES = (1, 2, 4, 8, 16, 24)

verdicts: list[tuple[str, float, float]] = []


def verdict(name: str, value: float, limit: float) -> str:
    verdicts.append((name, value, limit))
    return f"{value:5.2f}x (target <= {limit:.2f}x: {'met' if value <= limit else 'MISSED'})"


def _domain_specs(value: Any) -> list[dict[str, Any]]:
    """The VMI specs' `domain` mappings in a manifest, wherever the object nests them."""
    found = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            domain = item.get("domain")
            if isinstance(domain, dict) and ("devices" in domain or "resources" in domain or "cpu" in domain):
                found.append(domain)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _vary(docs: list[Any], n: int) -> list[Any]:
    """Variant n of a manifest: its objects renamed, cores, multiqueue, rng, balloon set by n."""
    docs = copy.deepcopy(docs)
    for doc in docs:
        if not isinstance(doc, dict):
            continue
        meta = doc.get("metadata")
        if isinstance(meta, dict) and isinstance(meta.get("name"), str):
            meta["name"] = f"{meta['name']}-{n:04d}"
        for domain in _domain_specs(doc):
            cpu = domain.get("cpu")
            if isinstance(cpu, dict) and "cores" in cpu:  # an instancetype's VM carries no cpu: left alone
                cpu["cores"] = CORES[n % len(CORES)]
            devices = domain.get("devices")
            if not isinstance(devices, dict):
                continue
            if n % 3 == 0:
                devices["networkInterfaceMultiqueue"] = True
            elif n % 3 == 1:
                devices.pop("networkInterfaceMultiqueue", None)
            if n % 4 == 0:
                devices["rng"] = {}
            if n % 5 == 0:
                devices["autoattachMemBalloon"] = False
    return docs


def _header(text: str) -> str:
    """The comment block a source starts with, kept so the corpus reads like hand-written manifests."""
    lines = []
    for line in text.splitlines(keepends=True):
        if not line.startswith("#"):
            break
        lines.append(line)
    return "".join(lines)


def make_kubevirt(out: Path, count: int) -> tuple[Path, Path]:
    """COUNT manifests in out/manifests and the domain XML vmtune renders for each in out/xml."""
    import yaml

    from vmtune.errors import VmtuneError
    from vmtune.stacks.frontend import read_file
    from vmtune.stacks.kubevirt.frontend import render

    manifests, xmls = out / "manifests", out / "xml"
    if manifests.is_dir() and sum(1 for _ in manifests.glob("*.yaml")) == count \
            and sum(1 for _ in xmls.glob("*.xml")) == count:
        return manifests, xmls
    shutil.rmtree(out, ignore_errors=True)
    manifests.mkdir(parents=True)
    xmls.mkdir()
    bases = []
    for path in SOURCES:
        text = path.read_text()
        bases.append((path.stem, _header(text), list(yaml.safe_load_all(text))))
    written = n = 0
    while written < count:
        stem, header, docs = bases[n % len(bases)]
        if n >= 50 * count:
            sys.exit("the fixtures give too few manifests that render one domain each")
        data = (header + yaml.safe_dump_all(_vary(docs, n), sort_keys=False)).encode()
        n += 1
        name = f"{written:04d}-{stem}.yaml"
        try:
            rendered, _claimed = render([read_file(name, data)])
        except VmtuneError:
            continue
        if len(rendered) != 1:  # an instancetype-only file, a Template of several VMs: not one to one
            continue
        (manifests / name).write_bytes(data)
        (xmls / f"{written:04d}-{stem}.xml").write_bytes(rendered[0].xml)
        written += 1
    return manifests, xmls


def refuse_errors(result: Any) -> None:
    for label, runs in result.runs.items():
        codes = {r.returncode for r in runs}
        if any(c < 0 or c > 1 for c in codes):
            sys.exit(f"{label} failed (exit codes {sorted(codes)}): fix the command before comparing times")


def row(label: str, result: Any, files: int) -> str:
    return (f"  {label:<34} cpu {result.cpu(label):7.3f} s  wall {result.wall(label):7.3f} s  "
            f"{result.cpu(label) / files * 1000:6.3f} ms cpu/file  peak RSS {result.rss(label):6.1f} MB")


def make(python: str, stack: str, out: Path, count: int) -> bool:
    """The corpus, written by the measured install's own renderer (a child process of `python`)."""
    made = subprocess.run([python, __file__, "--make", stack, "--out", str(out), "--count", str(count)])
    return made.returncode == 0


KUBEVIRT_SCHEMA = ROOT / "fixtures" / "stacks" / "kubevirt" / "schema" / "kubevirt-openapi.json"


def peer(name: str) -> str | None:
    """A peer tool's path: on PATH, or where `go install` puts it."""
    found = shutil.which(name)
    if found is None and (Path.home() / "go" / "bin" / name).is_file():
        found = str(Path.home() / "go" / "bin" / name)
    return found


def kubeconform_schemas(out: Path) -> str:
    """KubeVirt's schema as kubeconform reads a CRD's: one standalone JSON schema per kind and
    version (the kinds the swagger extract holds), and the -schema-location template naming them."""
    import json

    document = json.loads(KUBEVIRT_SCHEMA.read_text())
    out.mkdir(parents=True, exist_ok=True)
    for key, root in document["roots"].items():
        api, kind = key.split()
        version = api.rsplit("/", 1)[1]
        schema = {"$schema": "http://json-schema.org/draft-04/schema#", "$ref": f"#/definitions/{root}",
                  "definitions": document["definitions"]}
        (out / f"{kind.lower()}_{version}.json").write_text(json.dumps(schema))
    return str(out / "{{ .ResourceKind }}_{{ .ResourceAPIVersion }}.json")


def peers(vmtune: list[str], out: Path, manifests: Path, count: int, rounds: int) -> None:
    """vmtune against kubeconform (KubeVirt's schema) and kube-linter on the same manifests."""
    kubeconform = peer("kubeconform")
    linter = peer("kube-linter")
    if kubeconform is None:
        print("kubeconform: not installed (go install github.com/yannh/kubeconform/cmd/kubeconform@latest): "
              "its ratios not measured")
    if linter is None:
        print("kube-linter: not installed: not measured")
    if kubeconform is None and linter is None:
        return
    commands = {
        "vmtune check -j 1": [*vmtune, "check", "--isolated", "-j", "1", str(manifests)],
        "vmtune check (default -j)": [*vmtune, "check", "--isolated", str(manifests)],
    }
    if kubeconform is not None:
        location = kubeconform_schemas(out / "kubeconform-schemas")
        given = [kubeconform, "-schema-location", location, "-summary"]
        commands["kubeconform -n 1"] = [*given, "-n", "1", str(manifests)]
        commands["kubeconform (default -n)"] = [*given, str(manifests)]
        said = subprocess.run(commands["kubeconform -n 1"], capture_output=True, text=True)
        if said.returncode != 0 or f"Valid: {count}," not in said.stdout:  # a schema it cannot find is no peer
            sys.exit(f"kubeconform did not validate the {count} manifests: {said.stdout.strip()} {said.stderr.strip()}")
    if linter is not None:
        commands["kube-linter lint"] = [linter, "lint", str(manifests)]
    result = interleave(commands, rounds)
    for label, runs in result.runs.items():
        if label.startswith("vmtune") and any(r.returncode < 0 or r.returncode > 1 for r in runs):
            sys.exit(f"{label} failed: fix the command before comparing times")
    print(f"KubeVirt against its peers, {count:,} manifests, {rounds} rounds, {load()}")
    for key in commands:
        print(row(key, result, count))
    if kubeconform is not None:
        cpu = result.ratio("vmtune check -j 1", "kubeconform -n 1")
        wall = result.ratio("vmtune check (default -j)", "kubeconform (default -n)", "seconds")
        said = verdict("kubevirt -j 1 / kubeconform -n 1 (cpu)", cpu, 1.0)
        print(f"  vmtune -j 1 / kubeconform -n 1          cpu {said}"
              f"  wall {result.ratio('vmtune check -j 1', 'kubeconform -n 1', 'seconds'):5.2f}x")
        print(f"  vmtune default -j / kubeconform default  wall "
              f"{verdict('kubevirt default / kubeconform default (wall)', wall, 1.0)}"
              f"  cpu {result.ratio('vmtune check (default -j)', 'kubeconform (default -n)'):5.2f}x")
    if linter is not None:
        print(f"  vmtune -j 1 / kube-linter lint  cpu {result.ratio('vmtune check -j 1', 'kube-linter lint'):5.2f}x"
              f"  wall {result.ratio('vmtune check (default -j)', 'kube-linter lint', 'seconds'):5.2f}x"
              " (default -j; no target)")


def kubevirt(vmtune: list[str], python: str, out: Path, count: int, rounds: int) -> None:
    if not make(python, "kubevirt", out, count):
        sys.exit("the KubeVirt corpus could not be made")
    manifests, xmls = out / f"kubevirt-{count}" / "manifests", out / f"kubevirt-{count}" / "xml"
    commands = {
        "check manifests": [*vmtune, "check", "--isolated", "-j", "1", str(manifests)],
        "check rendered xml": [*vmtune, "check", "--isolated", "-j", "1", str(xmls)],
    }
    result = interleave(commands, rounds)
    refuse_errors(result)
    print(f"KubeVirt, {count:,} manifests, {rounds} rounds, {load()}")
    for key in commands:
        print(row(key, result, count))
    ratio = result.ratio("check manifests", "check rendered xml")
    print(f"  manifests / rendered xml  cpu {verdict(f'kubevirt {count:,} manifests / xml', ratio, 1.5)}"
          f"  wall {result.ratio('check manifests', 'check rendered xml', 'seconds'):5.2f}x")
    peers(vmtune, out, manifests, count, rounds)
    one = sorted(manifests.glob("*.yaml"))[0]
    one_xml = sorted(xmls.glob("*.xml"))[0]
    commands = {
        "import lxml.etree, yaml": [python, "-c", "import lxml.etree, yaml"],
        "check one.yaml": [*vmtune, "check", "--isolated", str(one)],
        "check one.xml": [*vmtune, "check", "--isolated", str(one_xml)],
    }
    result = interleave(commands, rounds * 4)
    refuse_errors(result)
    print(f"KubeVirt, one manifest, {rounds * 4} rounds, {load()}")
    for key in commands:
        print(row(key, result, 1))
    ratio = result.ratio("check one.yaml", "import lxml.etree, yaml")
    print(f"  one.yaml / import lxml.etree, yaml  cpu {verdict('kubevirt one manifest / import', ratio, 1.3)}"
          f"  wall {result.ratio('check one.yaml', 'import lxml.etree, yaml', 'seconds'):5.2f}x;"
          f"  one.yaml / one.xml {result.ratio('check one.yaml', 'check one.xml'):5.2f}x")


def make_openstack(out: Path, count: int) -> tuple[Path, Path] | None:
    """COUNT flavors in one listing and one image, and the domain XML vmtune renders for each pair;
    None when this checkout has no OpenStack front end."""
    try:
        from vmtune.stacks.openstack import frontend as nova
    except ImportError:
        return None
    import json

    from vmtune.stacks.frontend import read_file

    sources, xmls = out / "sources", out / "xml"
    shutil.rmtree(out, ignore_errors=True)
    sources.mkdir(parents=True)
    xmls.mkdir()
    flavors = []
    for n in range(count):
        vcpus = CORES[n % len(CORES)]
        specs: dict[str, str] = {}
        if n % 3 == 0:
            specs["hw:vif_multiqueue_enabled"] = "true"
        if n % 4 == 0:
            specs["hw:cpu_policy"] = "dedicated"
        if n % 5 == 0:
            specs["hw:mem_page_size"] = "large"
        flavors.append({"Name": f"f{n:04d}.{vcpus}c", "ID": f"{n:04d}", "RAM": 1024 * vcpus, "Disk": 20,
                        "Ephemeral": 0, "VCPUs": vcpus, "Is Public": True, "Properties": specs})
    image = {"name": "win2k22", "id": "5c0f7e0e-0000-4000-8000-000000000001", "disk_format": "qcow2",
             "container_format": "bare",
             "properties": {"os_type": "windows", "hw_disk_bus": "virtio", "hw_qemu_guest_agent": "yes"}}
    (sources / "flavors.json").write_text(json.dumps(flavors, indent=2) + "\n")
    (sources / "image.json").write_text(json.dumps(image, indent=2) + "\n")
    files = [read_file(str(p), p.read_bytes()) for p in sorted(sources.iterdir())]
    rendered, _claimed = nova.render(files)
    if len(rendered) != count:
        print(f"OpenStack: {len(rendered)} domains rendered from {count} flavors and one image: not measured")
        return None
    for i, item in enumerate(rendered):
        (xmls / f"{i:04d}.xml").write_bytes(item.xml)
    return sources, xmls


def openstack(vmtune: list[str], python: str, out: Path, count: int, rounds: int) -> None:
    if not make(python, "openstack", out, count):
        print("OpenStack: no front end in the install measured (vmtune.stacks.openstack): not measured")
        return
    sources, xmls = out / f"openstack-{count}" / "sources", out / f"openstack-{count}" / "xml"
    commands = {
        # named: a directory walk reads *.yaml and *.yml only, and these are `openstack -f json` output
        "check flavors x image": [*vmtune, "check", "--isolated", "-j", "1", *map(str, sorted(sources.iterdir()))],
        "check rendered xml": [*vmtune, "check", "--isolated", "-j", "1", str(xmls)],
    }
    result = interleave(commands, rounds)
    refuse_errors(result)
    print(f"OpenStack, {count:,} flavors x 1 image, {rounds} rounds, {load()}")
    for key in commands:
        print(row(key, result, count))
    ratio = result.ratio("check flavors x image", "check rendered xml")
    print(f"  flavors / rendered xml  cpu {verdict(f'openstack {count:,} flavors / xml', ratio, 1.3)}"
          f"  wall {result.ratio('check flavors x image', 'check rendered xml', 'seconds'):5.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", default=sys.executable,
                        help="interpreter of the vmtune install to measure (a venv with `pip install .`)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "vmtune-bench")
    parser.add_argument("--only", choices=("kubevirt", "openstack"), help="measure one stack")
    parser.add_argument("--quick", action="store_true", help="3 rounds: the whole run in about two minutes")
    parser.add_argument("--make", choices=("kubevirt", "openstack"), help=argparse.SUPPRESS)  # the child's task
    args = parser.parse_args()
    if args.make == "kubevirt":
        make_kubevirt(args.out / f"kubevirt-{args.count}", args.count)
        return
    if args.make == "openstack":
        sys.exit(0 if make_openstack(args.out / f"openstack-{args.count}", args.count) else 1)
    if args.quick:
        args.rounds = min(args.rounds, 3)
    script = Path(args.python).parent / "vmtune"
    vmtune = [str(script)] if script.exists() else [args.python, "-m", "vmtune"]
    args.out.mkdir(parents=True, exist_ok=True)
    if shutil.which("git") and subprocess.run(["git", "-C", str(args.out), "rev-parse", "--is-inside-work-tree"],
                                              capture_output=True).returncode == 0:
        sys.exit(f"{args.out} is inside a git work tree: vmtune would skip ignored files; give --out elsewhere")
    version = subprocess.run([*vmtune, "--version"], capture_output=True, text=True).stdout.strip()
    print(f"machine: {machine(args.python)}; {version} at {vmtune[0]}; {load()}")
    if args.only != "openstack":
        kubevirt(vmtune, args.python, args.out, args.count, args.rounds)
    if args.only != "kubevirt":
        openstack(vmtune, args.python, args.out, args.count, args.rounds)
    print(f"\nsummary ({load()}):")
    for name, value, limit in verdicts:
        print(f"  {name:<46} {value:7.2f}  target <= {limit:5.2f}  {'met' if value <= limit else 'MISSED'}")
    missed = sum(1 for _n, value, limit in verdicts if value > limit)
    print(f"{len(verdicts) - missed} of {len(verdicts)} targets met")


if __name__ == "__main__":
    main()
