"""Stack sources (KubeVirt manifests, OpenStack flavors and images) in worker processes, as
domain files are (issue 45): a file whose objects need no other file is read, rendered and
checked in a worker (render_alone); the parent loads and renders the others together, and their
rendered domains are checked in workers (vmtune.workers). What is reported, its order and the
exit code must be what one process gives, and a stopped run must end its workers.

The corpus is bench/stacks.py's (variants of the KubeVirt fixtures, and a flavor listing with
an image), with what makes a run's results depend on more than one object: the instancetypes
and preferences the VMs name (in files of their own), file-wide suppressions that match in one
object and not in others (SUP002 is judged once every object is checked), and a suppression
without a reason (SUP001)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_parallel import _alive, _children_like, _started

from vmtune.workers import PARALLEL_MIN_FILES

from conftest import FIXTURES, ROOT, run_vmtune

sys.path.insert(0, str(ROOT / "bench"))
from stacks import make_kubevirt, make_openstack  # the benchmark's own corpus

MANIFESTS = 240
FLAVORS = 40


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    """(a folder of manifests, instancetypes and preferences; the flavor and image files)."""
    root = tmp_path_factory.mktemp("stacks")
    folder, _xml = make_kubevirt(root / "kubevirt", MANIFESTS)
    for name in ("common-instancetypes-cluster-instancetypes.yaml", "common-instancetypes-cluster-preferences.yaml"):
        shutil.copy(FIXTURES / "stacks" / "kubevirt" / "instancetypes" / name, folder / name)
    # YAML that holds no KubeVirt object: a walk skips it unparsed, in a worker as in the parent
    (folder / "service.yaml").write_text("apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n"
                                         "spec:\n  ports:\n  - port: 80\n")
    manifests = sorted(folder.glob("0*.yaml"))
    for index, path in enumerate(manifests[::20]):
        said = ('# vmtune: ignore-file[CLK004] reason="lab clocks"\n' if index % 2 else
                "# vmtune: ignore-file[CLK004,NET004]\n")  # no reason: SUP001; NET004 mostly matches nothing
        path.write_bytes(said.encode() + path.read_bytes())
    openstack = make_openstack(root / "openstack", FLAVORS)
    assert openstack is not None
    sources, _xml = openstack
    return folder, sorted(sources.iterdir())


def _check(jobs: list[str], args: list[str], folder: Path, named: list[Path]) -> subprocess.CompletedProcess[str]:
    return run_vmtune("check", "--isolated", *jobs, *args, str(folder), *map(str, named))


@pytest.mark.parametrize("args", [[], ["-f", "json"], ["-f", "sarif"], ["--diff", "--unsafe-fixes"], ["--statistics"],
                                  ["--show-fixes", "--fail-on", "error"]])
def test_workers_report_on_stack_sources_exactly_what_one_process_reports(
        corpus: tuple[Path, list[Path]], args: list[str]) -> None:
    folder, named = corpus
    one = _check(["-j", "1"], args, folder, named)
    assert one.returncode == 1, one.stderr
    assert one.stdout
    report = one.stderr if "--diff" in args else one.stdout
    if "-f" not in args and "--statistics" not in args:
        checked = int(report.rsplit("\n", 2)[-2].split(" domain(s) checked")[0])
        # large enough for workers (a pair may also report on its image's file)
        assert checked >= MANIFESTS + FLAVORS >= PARALLEL_MIN_FILES
        assert " SUP001 " in report and " SUP002 " in report and " CLK004 " in report
        assert "instancetype clarge not found" in report  # not in the corpus: said
        assert "instancetype n1.large not found" not in report  # resolved from another file
    for jobs in ([], ["-j", "2"]):  # the default (every core), and two workers on any machine
        many = _check(jobs, args, folder, named)
        assert (many.returncode, many.stdout, many.stderr) == (one.returncode, one.stdout, one.stderr)


def test_workers_write_and_honour_the_same_baseline_on_stack_sources(corpus: tuple[Path, list[Path]],
                                                                     tmp_path: Path) -> None:
    """Files checked apart are reported by the process that checked them, except with a baseline:
    it allows each finding as often as it recorded it over the whole run, which only the parent,
    taking the files in order, can count. Copies of one VM (one name) in many files, with a
    baseline recorded from one copy: only the first copy's findings are hidden."""
    folder, named = corpus
    for jobs in ("1", "2"):
        written = _check(["-j", jobs], ["--write-baseline", str(tmp_path / f"b{jobs}.json")], folder, named)
        assert written.returncode == 0, written.stderr
    assert (tmp_path / "b1.json").read_text() == (tmp_path / "b2.json").read_text()
    copies = tmp_path / "copies"
    copies.mkdir()
    vm = sorted(folder.glob("0*.yaml"))[1].read_bytes()
    for index in range(PARALLEL_MIN_FILES + 20):
        (copies / f"{index:03d}.yaml").write_bytes(vm)
    baseline = tmp_path / "one.json"
    written = run_vmtune("check", "--isolated", "--write-baseline", str(baseline), str(copies / "000.yaml"))
    assert written.returncode == 0, written.stderr
    one = run_vmtune("check", "--isolated", "-j", "1", "--baseline", str(baseline), str(copies))
    two = run_vmtune("check", "--isolated", "-j", "2", "--baseline", str(baseline), str(copies))
    assert one.stdout.count("== ") == PARALLEL_MIN_FILES + 19 and "/000.yaml" not in one.stdout
    assert (two.returncode, two.stdout, two.stderr) == (one.returncode, one.stdout, one.stderr)


def test_an_unreadable_source_among_many_is_the_same_error_and_exit_either_way(
        corpus: tuple[Path, list[Path]], tmp_path: Path) -> None:
    folder, named = corpus
    broken = tmp_path / "broken.yaml"
    broken.write_text("apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nspec: [\n")
    one = _check(["-j", "1"], [], folder, [*named, broken])
    two = _check(["-j", "2"], [], folder, [*named, broken])
    assert one.returncode == 2
    assert [line for line in one.stderr.splitlines() if line.startswith("vmtune: ")] == \
        [line for line in one.stderr.splitlines() if str(broken) in line]
    assert (two.returncode, two.stdout, two.stderr) == (one.returncode, one.stdout, one.stderr)



@pytest.mark.parametrize("twice", ["file", "folder"])
def test_a_file_given_twice_is_reported_as_one_process_reports_it(corpus: tuple[Path, list[Path]], twice: str) -> None:
    """A manifest named and also found in its folder's walk (or the folder given twice) is loaded
    twice by one process, each finding of its objects then reported twice. A worker rendered each
    copy apart and the parent kept one copy's results (a dict keyed by object and file): with the
    corpus's folder given twice, 1,012 findings at -j 2 against 1,658 at -j 1."""
    folder, _named = corpus
    manifest = sorted(folder.glob("0*.yaml"))[4]
    given = [manifest] if twice == "file" else [folder]
    one = _check(["-j", "1"], [], folder, given)
    two = _check(["-j", "2"], [], folder, given)
    assert one.returncode == 1, one.stderr
    alone = _check(["-j", "1"], [], folder, [])
    mine = [line for line in alone.stdout.splitlines() if line.startswith(f"{manifest}:")]
    assert mine and [line for line in one.stdout.splitlines() if line.startswith(f"{manifest}:")] == \
        [line for line in mine for _copy in (1, 2)]  # each finding twice, by one process
    assert (two.returncode, two.stdout, two.stderr) == (one.returncode, one.stdout, one.stderr)


def test_of_two_folders_whose_configuration_fails_the_first_is_said_either_way(
        corpus: tuple[Path, list[Path]], tmp_path: Path) -> None:
    """A configuration that names an unknown rule ends a run over stack sources with its error. One
    process meets the first such folder first; this process, working the last chunks itself while
    the workers take the first, raised the last folder's error and ended the run with it."""
    folder, _named = corpus
    manifests = sorted(folder.glob("0*.yaml"))
    for index, path in enumerate(manifests):
        part = tmp_path / f"part{index * 4 // len(manifests)}"
        part.mkdir(exist_ok=True)
        shutil.copy(path, part / path.name)
    (tmp_path / "part1" / ".vmtune.yaml").write_text("ignore: [NOSUCH1]\n")
    (tmp_path / "part3" / ".vmtune.yaml").write_text("ignore: [NOSUCH3]\n")
    one = run_vmtune("check", "-j", "1", str(tmp_path))
    two = run_vmtune("check", "-j", "2", str(tmp_path))
    assert (one.returncode, one.stdout, one.stderr) == \
        (2, "", f"vmtune: {tmp_path}/part1/.vmtune.yaml: unknown rule selector 'NOSUCH1'\n")
    assert (two.returncode, two.stdout, two.stderr) == (one.returncode, one.stdout, one.stderr)


def test_configurations_ignored_are_said_in_the_order_one_process_says_them(
        corpus: tuple[Path, list[Path]], tmp_path: Path) -> None:
    """Each configuration ignored (writable by others) is said once, as one process first checks a
    file of its folder: in the order of the objects rendered from all files, the KubeVirt objects
    before the OpenStack pairs. The parent resolved every source's folder before the workers fork,
    in the sources' order, and said the OpenStack folder's first."""
    folder, named = corpus
    (tmp_path / "a-openstack").mkdir()
    (tmp_path / "b-kubevirt").mkdir()
    for path in named:
        shutil.copy(path, tmp_path / "a-openstack" / path.name)
    for path in sorted(folder.glob("0*.yaml")):
        shutil.copy(path, tmp_path / "b-kubevirt" / path.name)
    for part in ("a-openstack", "b-kubevirt"):
        (tmp_path / part / ".vmtune.yaml").write_text("fail-on: info\n")
        (tmp_path / part / ".vmtune.yaml").chmod(0o666)
    given = [*(str(tmp_path / "a-openstack" / path.name) for path in named), str(tmp_path / "b-kubevirt")]
    one = run_vmtune("check", "-j", "1", *given)
    two = run_vmtune("check", "-j", "2", *given)
    assert one.returncode == 1
    assert [line.split(": ")[2] for line in one.stderr.splitlines()] == \
        [f"{tmp_path}/b-kubevirt/.vmtune.yaml", f"{tmp_path}/a-openstack/.vmtune.yaml"]
    assert (two.returncode, two.stdout, two.stderr) == (one.returncode, one.stdout, one.stderr)


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not on PATH")
def test_objects_a_work_trees_search_finds_resolve_every_vm_of_the_run_either_way(
        corpus: tuple[Path, list[Path]], tmp_path: Path) -> None:
    """A VM in a git work tree naming objects no file given defines is rendered after a search of
    its work tree, and what the search finds joins the run's objects: one process resolves every
    VM naming them with it, the corpus's (outside any work tree) too. A worker rendered those
    apart, kept as no file given defined the names: 'instancetype clarge not found' 17 times at
    -j 2 over bench/stacks.py's 240 manifests, resolved at -j 1."""
    folder, _named = corpus
    repo = tmp_path / "repo"
    (repo / "definitions").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for name in ("example-clarge.yaml", "example-windows.yaml"):
        shutil.copy(KUBEVIRT / "instancetypes" / name, repo / "definitions" / name)
    vm = repo / "vm.yaml"
    shutil.copy(KUBEVIRT / "oracle" / "example-vm-cirros-clarge-windows.yaml", vm)
    one = _check(["-j", "1"], [], folder, [vm])
    two = _check(["-j", "2"], [], folder, [vm])
    assert one.returncode == 1, one.stderr
    assert "instancetype clarge not found" not in one.stdout
    assert f"defined in {repo}/definitions/example-windows.yaml" in one.stdout or \
        "definitions/example-windows.yaml" in one.stdout
    assert (two.returncode, two.stdout, two.stderr) == (one.returncode, one.stdout, one.stderr)


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not on PATH")
def test_a_work_trees_search_skips_the_files_rendered_apart_as_it_skips_every_file_given(tmp_path: Path) -> None:
    """The search of a work tree for the objects a VM names (in the parent, with the files rendered
    together) reads at most MAX_READ bytes and skips the files of the run, read already. It read
    again the files the workers had rendered apart: past its budget by them, it said it stopped
    ('not all of it was seen') where one process says no other file defines the name."""
    from vmtune.stacks.kubevirt.lookup import MAX_FILE, MAX_READ

    repo = tmp_path / "repo"
    (repo / "vms").mkdir(parents=True)
    (repo / "filler").mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for i in range(PARALLEL_MIN_FILES + 20):  # VMs that name nothing: rendered apart
        (repo / "vms" / f"vm{i:03d}.yaml").write_text(
            f"apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata:\n  name: vm{i}\nspec:\n  template:\n"
            "    spec:\n      domain:\n        devices: {}\n        resources:\n          requests:\n"
            "            memory: 1Gi\n")
    given = sum(path.stat().st_size for path in (repo / "vms").iterdir())
    left = MAX_READ - given // 2  # what the search may read besides the run's files, and not their size again
    for index in range(0, left, MAX_FILE):
        size = min(MAX_FILE, left - index)
        (repo / "filler" / f"f{index // MAX_FILE:03d}.yaml").write_bytes(b"#" * (size - 1) + b"\n")
    namer = repo / "namer.yaml"  # names an instancetype nothing defines: the work tree is searched
    namer.write_text("apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata:\n  name: namer\nspec:\n"
                     "  instancetype:\n    name: nowhere\n  template:\n    spec:\n      domain:\n        devices: {}\n")
    one = run_vmtune("check", "--isolated", "-j", "1", str(repo / "vms"), str(namer))
    two = run_vmtune("check", "--isolated", "-j", "2", str(repo / "vms"), str(namer))
    assert one.returncode == 0, one.stderr  # info findings only
    assert "instancetype nowhere not found" in one.stdout
    assert "no other file of its git work tree defines it" in one.stdout
    assert (two.returncode, two.stdout, two.stderr) == (one.returncode, one.stdout, one.stderr)


@pytest.mark.parametrize("mode", ["--fix", "--diff"])
def test_a_fix_that_removes_a_terraform_attribute_removes_it_whatever_process_checked_it(
        tmp_path: Path, mode: str) -> None:
    """--fix on many Terraform resources: the parent renders them together, workers check them,
    and the fixes' edits come back pickled. The edit that removes an attribute carries
    hcledit.REMOVE, which the editor knows by identity: unpickled, it was another object, and
    --unsafe-fixes wrote `match = "REMOVE"` and `model = "REMOVE"` into each file where one process
    removes both (CPU001's host-passthrough fix, 210 files; with --fix the report itself was the
    same), and --diff showed them (188 such lines over 220 files)."""
    source = (FIXTURES / "terraform" / "cpu-model.tf").read_text()
    fixed = source.replace('    mode  = "custom"\n    match = "exact"\n    model = "qemu64"\n',
                           '    mode  = "host-passthrough"\n    check = "none"\n')
    assert fixed != source
    runs = []
    for jobs in ("1", "2"):
        folder = tmp_path / f"j{jobs}"
        for index in range(PARALLEL_MIN_FILES + 10):
            (folder / f"m{index:03d}").mkdir(parents=True)
            (folder / f"m{index:03d}" / "main.tf").write_text(source)
        result = run_vmtune("check", "--isolated", "-j", jobs, mode, "--unsafe-fixes", str(folder))
        runs.append((result.returncode, result.stdout.replace(str(folder), "DIR"),
                     result.stderr.replace(str(folder), "DIR"),
                     sorted({path.read_text() for path in folder.glob("*/main.tf")})))
    one, two = runs
    assert one[3] == [fixed if mode == "--fix" else source]
    assert "REMOVE" not in one[1]
    assert two == one


def test_the_terraform_removal_is_itself_once_pickled() -> None:
    import pickle

    from vmtune.stacks.terraform.hcledit import REMOVE

    assert pickle.loads(pickle.dumps(REMOVE, -1)) is REMOVE


@pytest.mark.skipif(shutil.which("kustomize") is None and shutil.which("kubectl") is None,
                    reason="neither kustomize nor kubectl is on PATH")
def test_a_kustomizations_files_among_many_are_built_in_the_parent_not_rendered_alone(
        corpus: tuple[Path, list[Path]], tmp_path: Path) -> None:
    """An overlay's patch names no instancetype, yet it is no VM of its own: a worker rendering it
    alone judged it as one (a whole VM with an e1000 NIC) where one process judges the build."""
    from test_kubevirt_kustomize import _repo

    folder, named = corpus
    repo = _repo(tmp_path)
    kustomized = [repo / "overlays" / "prod" / "nic.yaml", repo / "base" / "vm.yaml"]
    from vmtune.stacks.frontend import StackContext, read_file, render_alone

    # each alone would build its overlays again: prod-web from the patch, and from the base
    assert [render_alone(read_file(str(p), p.read_bytes()), StackContext()) for p in kustomized] == [None, None]
    one = _check(["-j", "1"], ["-f", "json"], folder, [*named, *kustomized])
    assert one.returncode == 1, one.stderr
    assert f'"domain": "VirtualMachine/prod-web (kustomize {repo}/overlays/prod)"' in one.stdout
    assert '"domain": "VirtualMachine/web"' not in one.stdout  # the patch judged alone
    two = _check(["-j", "2"], ["-f", "json"], folder, [*named, *kustomized])
    assert (two.returncode, two.stdout, two.stderr) == (one.returncode, one.stdout, one.stderr)


KUBEVIRT = FIXTURES / "stacks" / "kubevirt"


@pytest.mark.parametrize(("path", "apart"), [
    (KUBEVIRT / "oracle" / "example-vm-alpine-datavolume.yaml", True),  # VMs that name nothing
    (KUBEVIRT / "oracle" / "cit-fedora-n1-large.yaml", False),  # names an instancetype another file may hold
    (KUBEVIRT / "instancetypes" / "example-csmall.yaml", False),  # holds one another file's VM may name
])
def test_only_a_file_that_renders_the_same_alone_is_rendered_in_a_worker(path: Path, apart: bool) -> None:
    """Workers render and check the files that need no other (render_alone); the parent loads
    the rest together, as the references between them need."""
    from vmtune.stacks.frontend import StackContext, read_file, render_all, render_alone

    alone = render_alone(read_file(str(path), path.read_bytes()), StackContext())
    assert (alone is not None) == apart
    if alone is not None:  # what render_all gives the file: the same domains, byte for byte
        rendered, claimed = render_all([read_file(str(path), path.read_bytes())], StackContext())
        assert [(r.name, r.xml) for r in alone[0]] == [(r.name, r.xml) for r in rendered]
        assert alone[1] == claimed == {str(path)}


def test_a_vm_naming_objects_renders_apart_only_outside_a_work_tree(tmp_path: Path) -> None:
    """A VM that names an instancetype and a preference is rendered in a worker as if no file of
    the run defined them (tied_by says which names; the parent keeps the results only when no file
    defines one): outside a git work tree its rendering is render_all's, byte for byte. In a work
    tree it is not rendered apart: the search of the work tree depends on the run's files."""
    from vmtune.stacks.frontend import StackContext, Together, read_file, render_all, render_apart, tied_by

    named = KUBEVIRT / "oracle" / "cit-fedora-n1-large.yaml"
    outside = tmp_path / named.name
    outside.write_bytes(named.read_bytes())
    apart = render_apart(read_file(str(outside), outside.read_bytes()), StackContext())
    assert not isinstance(apart, Together)
    assert (apart.stack, apart.names) == ("kubevirt", frozenset({"n1.large", "fedora"}))
    rendered, claimed = render_all([read_file(str(outside), outside.read_bytes())], StackContext())
    assert [(r.name, r.xml, [n.message for n in r.notes]) for r in apart.rendered] == \
        [(r.name, r.xml, [n.message for n in r.notes]) for r in rendered]
    assert apart.claimed == claimed == {str(outside)}
    in_tree = tied_by(read_file(str(named), named.read_bytes()), StackContext())
    # it defines none, but what the search of its work tree finds resolves the other files' VMs
    assert isinstance(in_tree, Together) and in_tree.defines == {"kubevirt": None}
    defining = KUBEVIRT / "instancetypes" / "example-csmall.yaml"  # what it defines decides the others
    defines = tied_by(read_file(str(defining), defining.read_bytes()), StackContext())
    assert isinstance(defines, Together) and defines.defines == {"kubevirt": frozenset({"csmall"})}


# -- the parent stopped: no worker outlives it --------------------------------------------------------

def _stop_while_checking(folder: Path, signum: int) -> tuple[int, bytes, bytes, dict[int, str], float]:
    """`vmtune check --isolated -j 3 FOLDER` in a session of its own, stopped with `signum` as soon as
    its two workers run (the third job is the parent's: it works chunks too). Returns the exit code,
    stdout, stderr, the workers and the seconds until every worker had ended."""
    command = [sys.executable, "-m", "vmtune", "check", "--isolated", "-j", "3", str(folder)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=folder.parent,
                            start_new_session=True)
    try:
        workers: dict[int, str] = {}
        deadline = time.monotonic() + 120
        while len(workers) < 2 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
            with contextlib.suppress(OSError, IndexError):
                workers = {pid: _started(pid) for pid in _children_like(proc.pid)}
        assert len(workers) == 2, f"the run ended (exit {proc.poll()}) before its two workers were seen"
        os.kill(proc.pid, signum)
        stopped = time.monotonic()
        out, err = proc.communicate(timeout=30)  # a worker left alive holds stdout open: this timed out
        while any(_alive(pid, started) for pid, started in workers.items()) and time.monotonic() < stopped + 10:
            time.sleep(0.01)
        ended = time.monotonic() - stopped
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # whatever is left of the session
        proc.wait()
    return proc.returncode, out, err, workers, ended


@pytest.fixture(scope="module")
def many_manifests(corpus: tuple[Path, list[Path]], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The corpus's manifests eight times over (new file names): the workers check for seconds."""
    folder = tmp_path_factory.mktemp("many") / "manifests"
    folder.mkdir()
    for path in corpus[0].glob("*.yaml"):
        for copy in range(8):
            shutil.copy(path, folder / f"{copy}-{path.name}")
    return folder


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
def test_a_stopped_stack_run_ends_its_workers(many_manifests: Path, signum: int) -> None:
    """SIGTERM (a CI timeout, a service manager) stops the run as Ctrl-C does: exit 128 + 15, no
    traceback, no partial report, and both workers end; SIGKILL (the OOM killer): the workers
    end with their parent, and none keeps a caller reading stdout waiting."""
    code, out, err, workers, ended = _stop_while_checking(many_manifests, signum)
    assert len(workers) == 2
    assert ended < 10 and not any(_alive(pid, started) for pid, started in workers.items())
    assert out == b""  # stack sources are reported once all are checked: nothing was
    if signum == signal.SIGTERM:
        assert (code, err) == (143, b"")
    else:
        assert code == -signal.SIGKILL
