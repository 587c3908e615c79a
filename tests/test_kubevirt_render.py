"""The KubeVirt front end's pure parts: objects found in manifests, instancetypes and preferences
applied as virt-controller does, and the domain virt-launcher would write. The renderer is judged
against KubeVirt's own converter (fixtures/stacks/kubevirt: dump/*.yaml run through kubevirt
d923fdb's code, and the oracle cases when present): the same warning and error rules must fire."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from vmtune.facts.domain import Domain
from vmtune.rules.base import Severity
from vmtune.stacks.frontend import read_file
from vmtune.stacks.kubevirt import Settings, frontend, instancetypes, objects
from vmtune.stacks.kubevirt import render as render_module
from vmtune.stacks.kubevirt.knobs_rows import ROWS
from vmtune.stacks.kubevirt.render import render

from conftest import FIXTURES
from helpers import findings, options, set_knob

KV = FIXTURES / "stacks" / "kubevirt"


def _cases() -> list[tuple[Path, Path]]:
    """(manifest, the XML KubeVirt's own code wrote for it): dump/ and the oracle, on a node that
    does not report its TSC frequency (how dump/ and oracle/*.xml were generated)."""
    pairs = [(y, KV / f"{y.stem}.xml") for y in sorted((KV / "dump").glob("*.yaml"))]
    pairs += [(y, y.with_suffix(".xml")) for y in sorted((KV / "oracle").glob("*.yaml"))]
    # wild/: public manifests vmtune was not written against (oracle/wild/PROVENANCE.md)
    pairs += [(y, y.with_suffix(".xml")) for y in sorted((KV / "oracle" / "wild").glob("*.yaml"))]
    return [(y, x) for y, x in pairs if x.exists()]


def _node_tsc_cases() -> list[tuple[Path, Path]]:
    """(manifest, KubeVirt's XML on a node that reports its TSC frequency): oracle/node-tsc/ and
    oracle/wild/node-tsc/."""
    return [(y, y.with_suffix(".xml")) for d in ("node-tsc", "wild/node-tsc")
            for y in sorted((KV / "oracle" / d).glob("*.yaml")) if y.with_suffix(".xml").exists()]


def _references() -> list[Any]:
    """The instancetypes and preferences every oracle case was generated with."""
    return [read_file(str(p), p.read_bytes(), explicit=False) for p in sorted((KV / "instancetypes").glob("*.yaml"))]


def _failing(xml: bytes) -> set[str]:
    return {f.rule.code for f in findings(xml) if f.severity >= Severity.WARNING}


def _render_text(text: str, references: str = "") -> tuple[bytes, Any]:
    found = objects.find(list(yaml.safe_load_all(text)))
    refs = objects.find(list(yaml.safe_load_all(references))) if references else objects.Found()
    vmi = found.vmis[0]
    its = {s.name: s.spec for s in [*found.instancetypes, *refs.instancetypes]}
    prefs = {s.name: s.spec for s in [*found.preferences, *refs.preferences]}
    it = its.get(vmi.instancetype.name) if vmi.instancetype else None
    pref = prefs.get(vmi.preference.name) if vmi.preference else None
    spec, origin, _conflicts = instancetypes.apply(vmi.spec, it, pref)
    return render(spec, vmi.name, vmi.namespace), origin


# -- agreement with KubeVirt's converter -------------------------------------------------------------

@pytest.fixture(scope="module")
def references() -> list[Any]:
    return _references()


def _agreement(manifest: Path, oracle: Path, references: list[Any]) -> tuple[set[str], set[str]]:
    (item,), _names = frontend.render([read_file(manifest.name, manifest.read_bytes())],
                                      Settings(references=references))
    opts = options(os=item.os_family)  # the OS as vmtune check takes it for both
    mine = {f.rule.code for f in findings(item.xml, opts) if f.severity >= Severity.WARNING}
    theirs = {f.rule.code for f in findings(oracle.read_bytes(), opts) if f.severity >= Severity.WARNING}
    return mine, theirs


@pytest.mark.parametrize("manifest, oracle", _cases(), ids=lambda p: p.stem)
def test_the_rendering_fires_the_rules_kubevirts_own_xml_fires(manifest: Path, oracle: Path, references: list[Any],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # the renderer's switch to nodes that report no TSC frequency, as these outputs were made
    monkeypatch.setattr(render_module, "NODE_TSC_HZ", None)
    mine, theirs = _agreement(manifest, oracle, references)
    assert mine == theirs


@pytest.mark.parametrize("manifest, oracle", _node_tsc_cases(), ids=lambda p: p.stem)
def test_the_default_rendering_agrees_with_kubevirt_on_nodes_that_report_their_tsc_frequency(
        manifest: Path, oracle: Path, references: list[Any]) -> None:
    assert render_module.NODE_TSC_HZ == 2400000000  # the frequency node-tsc/ was generated with
    mine, theirs = _agreement(manifest, oracle, references)
    assert mine == theirs


def test_every_oracle_case_that_needs_a_tsc_frequency_has_its_node_tsc_output(references: list[Any]) -> None:
    # the other cases render the same on both kinds of node, so the default rendering is judged on all
    needing = set()
    for manifest, _oracle in _cases():
        (item,), _names = frontend.render([read_file(manifest.name, manifest.read_bytes())],
                                          Settings(references=references))
        if b'<timer name="tsc"' in item.xml:
            needing.add(manifest.stem)
    assert needing == {y.stem for y, _x in _node_tsc_cases()}
    assert len(needing) == 15


def test_the_oracle_cases_are_all_there() -> None:
    assert len(_cases()) >= 69 or not (KV / "oracle").is_dir()


@pytest.mark.parametrize("rejected", sorted((KV / "oracle" / "wild").glob("*.rejected.txt")), ids=lambda p: p.stem)
def test_a_wild_manifest_kubevirt_refuses_for_a_feature_gate_is_checked_for_a_cluster_with_the_gate(
        rejected: Path, references: list[Any]) -> None:
    # the harness's cluster has no feature gates; a cluster that has the gate runs the VMI, so vmtune
    # checks it (it cannot know the cluster's gates)
    assert "feature gate is not enabled" in rejected.read_text()
    manifest = rejected.with_name(rejected.name.replace(".rejected.txt", ".yaml"))
    (item,), _names = frontend.render([read_file(manifest.name, manifest.read_bytes())],
                                      Settings(references=references))
    assert item.xml.startswith(b"<domain ")


def test_the_wild_oracle_cases_are_all_judged() -> None:
    wild = [y for y, _x in _cases() if y.parent.name == "wild"]
    assert len(wild) >= 42 or not (KV / "oracle" / "wild").is_dir()


@pytest.mark.parametrize("rejected", sorted((KV / "oracle").glob("*-c*.rejected.txt")), ids=lambda p: p.stem)
def test_a_vm_kubevirt_refuses_for_an_instancetype_conflict_says_so(rejected: Path, references: list[Any]) -> None:
    manifest = rejected.with_name(rejected.name.replace(".rejected.txt", ".yaml"))
    (item,), _names = frontend.render([read_file(manifest.name, manifest.read_bytes())],
                                      Settings(references=references))
    assert "spec.domain.memory.guest" in rejected.read_text()
    assert any(n.message.startswith("domain.memory.guest is set on the VM and by its instancetype: KubeVirt "
                                    "refuses the VM") for n in item.notes)


def test_the_rendering_says_kubevirt_manages_it_and_is_well_formed() -> None:
    from vmtune.facts.domain import Domain

    xml, _origin = _render_text((KV / "dump" / "vmi-linux-16cores.yaml").read_text())
    assert Domain.parse(xml, "x.xml").manager == "kubevirt"


# -- the seed cases of issue #33 ---------------------------------------------------------------------

WINDOWS_VM = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata: {name: win10}
spec:
  template:
    spec:
      domain:
        clock:
          utc: {}
          timer:
            hpet: {present: false}
            hyperv: {}
        cpu: {cores: 4}
        devices:
          disks:
          - {name: root, disk: {bus: virtio}}
          interfaces:
          - {name: default, masquerade: {}}
        features:
          hyperv: {relaxed: {}, vapic: {}, spinlocks: {}}
        memory: {guest: 8Gi}
      networks:
      - {name: default, pod: {}}
      volumes:
      - {name: root, persistentVolumeClaim: {claimName: win10}}
"""


def test_windows_with_hpet_off_and_no_synictimer_gets_the_synthetic_timer_warning() -> None:
    xml, _origin = _render_text(WINDOWS_VM)
    assert "CLK002" in _failing(xml)


def test_the_clk002_knob_cures_it_and_the_webhook_adds_synic_and_vpindex() -> None:
    manifest = yaml.safe_load(WINDOWS_VM)
    manifest["spec"]["template"]["spec"]["domain"]["features"]["hyperv"]["synictimer"] = {}
    spec = manifest["spec"]["template"]["spec"]
    xml = render(spec, "win10")
    assert b'<synic state="on"/>' in xml and b'<vpindex state="on"/>' in xml and b'<stimer state="on"/>' in xml
    assert "CLK002" not in _failing(xml)


WELL_TUNED_PREFERENCE = """\
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterPreference
metadata: {name: windows.2k22.virtio}
spec:
  clock:
    preferredClockOffset: {utc: {}}
    preferredTimer:
      hpet: {present: false}
      hyperv: {}
      pit: {tickPolicy: delay}
      rtc: {tickPolicy: catchup}
  cpu: {preferredCPUTopology: cores}
  devices:
    preferredDiskBus: virtio
    preferredInterfaceModel: virtio
    preferredNetworkInterfaceMultiQueue: true
    preferredTPM: {}
  features:
    preferredAcpi: {}
    preferredApic: {}
    preferredHyperv:
      frequencies: {}
      ipi: {}
      relaxed: {}
      reset: {}
      runtime: {}
      spinlocks: {spinlocks: 8191}
      synic: {}
      synictimer: {direct: {}}
      tlbflush: {}
      vapic: {}
      vpindex: {}
    preferredSmm: {}
  firmware:
    preferredEfi: {secureBoot: true}
"""
VM_WITH_PREFERENCE = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata: {name: win2k22}
spec:
  instancetype: {name: u1.xlarge}
  preference: {name: windows.2k22.virtio}
  template:
    spec:
      domain:
        devices:
          disks:
          - {name: root, disk: {}}
          interfaces:
          - {name: default, masquerade: {}}
      networks:
      - {name: default, pod: {}}
      volumes:
      - {name: root, dataVolume: {name: win2k22}}
---
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterInstancetype
metadata: {name: u1.xlarge}
spec:
  cpu: {guest: 4}
  memory: {guest: 16Gi}
"""


def test_a_vm_using_a_well_tuned_windows_preference_gets_no_warning() -> None:
    xml, origin = _render_text(VM_WITH_PREFERENCE, WELL_TUNED_PREFERENCE)
    assert _failing(xml) == set()
    assert b'<topology sockets="1" cores="4" threads="1"/>' in xml  # preferredCPUTopology: cores
    assert origin["domain", "devices", "disks", 0, "disk", "bus"] == "preference"
    assert origin["domain", "cpu", "cores"] == "instancetype"


def test_the_default_sockets_topology_of_an_instancetype_without_preference() -> None:
    xml, _origin = _render_text(VM_WITH_PREFERENCE.replace("  preference: {name: windows.2k22.virtio}\n", ""))
    assert b'<topology sockets="4" cores="1" threads="1"/>' in xml


def test_sixteen_cores_without_multiqueue_get_the_queue_warning_and_the_knob_cures_it() -> None:
    text = (KV / "dump" / "vmi-linux-16cores.yaml").read_text()
    xml, _origin = _render_text(text)
    assert "NET001" in _failing(xml)
    cured = yaml.safe_load(text)
    cured["spec"]["domain"]["devices"]["networkInterfaceMultiqueue"] = True
    assert b'<driver name="vhost" queues="16"/>' in render(cured["spec"], "x")
    assert "NET001" not in _failing(render(cured["spec"], "x"))


def test_a_volume_without_a_disk_gets_the_preferences_disk_bus() -> None:
    # virt-controller's SetupVMIFromVM adds a disk for each volume without one (util.SetDefaultVolumeDisk)
    # BEFORE the preference applies, so the preference's preferredDiskBus reaches it (KubeVirt's user
    # guide, boot_from_external_source.md: fedora preference, disks listed for the cdrom only)
    vm = VM_WITH_PREFERENCE.replace("- {name: root, disk: {}}", "- {name: iso, cdrom: {bus: sata}}")
    vm = vm.replace("      - {name: root, dataVolume: {name: win2k22}}\n",
                    "      - {name: root, dataVolume: {name: win2k22}}\n"
                    "      - {name: iso, containerDisk: {image: x}}\n")
    xml, origin = _render_text(vm, WELL_TUNED_PREFERENCE)
    assert b'<target bus="virtio" dev="vda"/>' in xml
    assert "DSK004" not in _failing(xml)
    assert origin["domain", "devices", "disks", 1, "disk", "bus"] == "preference"


def test_a_volume_a_filesystem_uses_gets_no_disk() -> None:
    # util.SetDefaultVolumeDisk skips the names of filesystems (virtiofs) as well as of disks: KubeVirt
    # d923fdb writes one <disk> and a <filesystem> for this VMI (vmtune-kvdump)
    spec = {"domain": {"devices": {"disks": [{"name": "root", "disk": {"bus": "virtio"}}],
                                   "filesystems": [{"name": "shared", "virtiofs": {}}]},
                       "resources": {"requests": {"memory": "1Gi"}}},
            "volumes": [{"name": "root", "containerDisk": {"image": "x"}},
                        {"name": "shared", "configMap": {"name": "app-config"}}]}
    xml = render(spec, "fs")
    assert xml.count(b"<disk ") == 1
    assert "DSK004" not in _failing(xml)


def test_a_preference_only_fills_what_the_vm_leaves_unset() -> None:
    vm = VM_WITH_PREFERENCE.replace("{name: root, disk: {}}", "{name: root, disk: {bus: sata}}")
    xml, origin = _render_text(vm, WELL_TUNED_PREFERENCE)
    assert b'bus="sata"' in xml
    assert ("domain", "devices", "disks", 0, "disk", "bus") not in origin


# -- every knob row cures its finding ---------------------------------------------------------------

LINUX = yaml.safe_load((KV / "dump" / "vmi-linux-16cores.yaml").read_text())["spec"]
DEDICATED = yaml.safe_load((KV / "dump" / "vmi-linux-dedicated.yaml").read_text())["spec"]
WINDOWS = yaml.safe_load(WINDOWS_VM)["spec"]["template"]["spec"]
_E1000 = copy.deepcopy(WINDOWS)
_E1000["domain"]["devices"]["interfaces"][0]["model"] = "e1000"
_E1000["domain"]["devices"]["disks"][0]["disk"]["bus"] = "sata"
_TABLET = copy.deepcopy(LINUX)
_TABLET["domain"]["devices"]["inputs"] = [{"name": "tablet", "type": "tablet", "bus": "usb"}]
_REENLIGHT = copy.deepcopy(WINDOWS)
_REENLIGHT["domain"]["features"]["hyperv"]["reenlightenment"] = {}
BASES = {"REENLIGHT": _REENLIGHT, "LINUX": LINUX, "DEDICATED": DEDICATED, "WINDOWS": WINDOWS, "E1000": _E1000, "TABLET": _TABLET}  # USB001: KubeVirt writes qemu-xhci, which the rule accepts  # noqa: E501
# rule -> the spec that shows its finding (on which the first row's value is then set)
PROVEN = {"NET001": "LINUX", "NET004": "E1000", "DSK004": "E1000", "DSK003": "LINUX", "CLK002": "WINDOWS",
          "HV001": "WINDOWS", "HV005": "REENLIGHT", "CLK004": "LINUX", "MEM001": "LINUX", "MEM002": "DEDICATED"}


@pytest.mark.parametrize("code", sorted(PROVEN))
def test_the_first_knob_row_cures_its_finding(code: str) -> None:
    # on nodes that report no TSC frequency: there HV005 shows (the rows also advise on XML
    # KubeVirt generated on such nodes)
    base = copy.deepcopy(BASES[PROVEN[code]])
    assert code in {f.rule.code for f in findings(render(base, "x", tsc_frequency=None))}
    knob = ROWS[code][0]
    assert knob.on == "vmi" and knob.value is not None
    set_knob(base, knob.path, knob.value)
    assert code not in {f.rule.code for f in findings(render(base, "x", tsc_frequency=None))}


def test_reenlightenment_gets_the_nodes_tsc_frequency_as_kubevirt_writes_it_and_no_hv005() -> None:
    xml = render(copy.deepcopy(_REENLIGHT), "x")
    assert b'<timer name="hypervclock" present="yes"/>\n<timer name="tsc" frequency="2400000000"/>\n</clock>' in xml
    assert "HV005" not in _failing(xml)
    assert b'name="tsc"' not in render(copy.deepcopy(WINDOWS), "x")  # no reenlightenment: no hint
    disabled = copy.deepcopy(_REENLIGHT)
    disabled["domain"]["features"]["hyperv"]["reenlightenment"] = {"enabled": False}
    assert b'name="tsc"' not in render(disabled, "x")


def test_an_invtsc_vm_without_a_clock_gets_one_with_the_tsc_timer() -> None:
    spec = copy.deepcopy(LINUX)
    spec["domain"]["cpu"]["features"] = [{"name": "invtsc", "policy": "require"}]
    assert b'<clock>\n<timer name="tsc" frequency="2400000000"/>\n</clock>' in render(spec, "x")
    spec["domain"]["cpu"]["features"] = [{"name": "invtsc", "policy": "optional"}]
    assert b'name="tsc"' not in render(spec, "x")  # only require and force ask for it


def test_the_tsc_assumption_is_said_on_the_vm_at_its_reenlightenment_field() -> None:
    manifest = yaml.safe_load(WINDOWS_VM)
    manifest["spec"]["template"]["spec"]["domain"]["features"]["hyperv"]["reenlightenment"] = {}
    text = yaml.safe_dump(manifest, sort_keys=False)
    (item,), _names = frontend.render([read_file("vm.yaml", text.encode())])
    (note,) = [n for n in item.notes if n.code == "STK002"]
    assert text.splitlines()[note.line - 1].strip() == "reenlightenment: {}"
    assert note.message == (
        "assumed: the nodes report their TSC frequency (virt-handler labels a node whose CPU has an invariant TSC "
        "with it, and KubeVirt gives this reenlightenment VM the cluster's lowest: rendered as 2400000000 Hz); on "
        "nodes that do not, KubeVirt writes none: HV005 (reenlightenment blocks live migration)")


def test_every_row_names_a_known_object() -> None:
    assert all(k.on in ("vmi", "preference", "instancetype") for knobs in ROWS.values() for k in knobs)
    assert all(knobs[0].on == "vmi" for knobs in ROWS.values())


# -- objects ----------------------------------------------------------------------------------------

KINDS = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: a}
spec: {domain: {devices: {}}}
---
apiVersion: pool.kubevirt.io/v1alpha1
kind: VirtualMachinePool
metadata: {name: b}
spec:
  virtualMachineTemplate:
    spec:
      preference: {kind: VirtualMachinePreference, name: fedora}
      template: {spec: {domain: {devices: {}}}}
---
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstanceReplicaSet
metadata: {generateName: c-}
spec: {template: {spec: {domain: {devices: {}}}}}
---
apiVersion: harvesterhci.io/v1beta1
kind: VirtualMachineTemplateVersion
metadata: {name: d}
spec: {vm: {spec: {template: {spec: {domain: {devices: {}}}}}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: ignored}
---
apiVersion: v1
kind: List
items:
- apiVersion: kubevirt.io/v1
  kind: VirtualMachine
  metadata: {name: e}
  spec: {template: {spec: {domain: {devices: {}}}}}
- apiVersion: instancetype.kubevirt.io/v1alpha2
  kind: VirtualMachineInstancetype
  metadata: {name: small}
  spec: {cpu: {guest: 1}, memory: {guest: 1Gi}}
"""


def test_every_kind_that_carries_a_vmi_spec_is_found_with_its_path() -> None:
    found = objects.find(list(yaml.safe_load_all(KINDS)))
    assert [(v.kind, v.name, v.doc, v.spec_path) for v in found.vmis] == [
        ("VirtualMachineInstance", "a", 0, ("spec",)),
        ("VirtualMachinePool", "b", 1, ("spec", "virtualMachineTemplate", "spec", "template", "spec")),
        ("VirtualMachineInstanceReplicaSet", "c-", 2, ("spec", "template", "spec")),
        ("VirtualMachineTemplateVersion", "d", 3, ("spec", "vm", "spec", "template", "spec")),
        ("VirtualMachine", "e", 5, ("items", 0, "spec", "template", "spec")),
    ]
    assert found.vmis[1].preference is not None and found.vmis[1].preference.name == "fedora"
    assert [s.name for s in found.instancetypes] == ["small"]


def test_a_file_without_kubevirt_objects_finds_nothing() -> None:
    assert not objects.find([{"apiVersion": "v1", "kind": "ConfigMap"}, "a scalar", [1, 2], None])


TEMPLATE = """\
apiVersion: template.openshift.io/v1
kind: Template
metadata: {name: fedora-server}
objects:
- apiVersion: kubevirt.io/v1
  kind: VirtualMachine
  metadata: {name: '${NAME}'}
  spec:
    template:
      spec:
        domain:
          cpu: {cores: '${{CPU_CORES}}'}
          devices: {}
        volumes:
        - {name: root, containerDisk: {image: '${IMAGE}'}}
parameters:
- {name: NAME, generate: expression, from: 'fedora-[a-z0-9]{8}'}
- {name: CPU_CORES, value: '16'}
- {name: IMAGE, value: quay.io/containerdisks/fedora}
"""


def test_template_parameters_are_resolved_from_their_defaults_and_said_so() -> None:
    (vm,) = objects.find([yaml.safe_load(TEMPLATE)]).vmis
    assert vm.spec["domain"]["cpu"]["cores"] == 16  # ${{P}}: the default's YAML value
    assert vm.spec["volumes"][0]["containerDisk"]["image"] == "quay.io/containerdisks/fedora"
    assert vm.name == "${NAME}"
    codes = {(code, message.split("'")[1]) for code, _path, message in vm.notes}
    assert codes == {("STK001", "NAME"), ("STK002", "CPU_CORES"), ("STK002", "IMAGE")}
    assert "unresolved parameter" in next(m for c, _p, m in vm.notes if c == "STK001")


def test_a_preference_not_among_the_files_is_a_note_and_still_tells_the_os() -> None:
    text = VM_WITH_PREFERENCE.replace("windows.2k22.virtio", "windows.2k22.team").encode()  # not common-instancetypes'
    stack_file = read_file("vm.yaml", text)
    (item,), recognised = frontend.render([stack_file])
    assert recognised == {"vm.yaml"}
    assert item.os_family == "windows"
    (note,) = item.notes
    assert note.code == "STK001" and note.line == 6
    assert note.message.startswith("preference windows.2k22.team not found in the files given")


def test_a_common_instancetypes_preference_not_among_the_files_is_taken_from_the_table() -> None:
    (item,), _ = frontend.render([read_file("vm.yaml", VM_WITH_PREFERENCE.encode())])
    assert [n.code for n in item.notes if n.code == "STK001"] == []
    note = next(n for n in item.notes if n.line == 6)
    assert note.code == "STK002"
    assert note.message.startswith("assumed: preference windows.2k22.virtio as common-instancetypes v1.7.0 "
                                   "(fb2fbb9687ba) defines it")
    assert b"<stimer" in item.xml  # the preference's Hyper-V set


def test_the_os_family_of_common_instancetypes_names() -> None:
    assert [instancetypes.os_family_of(n) for n in ("windows.11", "rhel.9", "fedora", "ubuntu", "centos.stream9",
                                                     "alpine", "legacy")] == \
        ["windows", "linux", "linux", "linux", "linux", "linux", None]


# -- placement --------------------------------------------------------------------------------------

def test_a_finding_is_placed_on_the_mapping_where_the_field_belongs_with_the_edit() -> None:
    data = (KV / "dump" / "vmi-linux-16cores.yaml").read_bytes()
    (item,), _names = frontend.render([read_file("16.yaml", data)])
    place = item.place("NET001", None, Domain.parse(item.xml, "x"))
    assert (place.line, place.field) == (11, "spec.domain.devices.networkInterfaceMultiqueue")
    assert [(e.doc, e.path, e.value) for e in place.edits or ()] == \
        [(0, ("spec", "domain", "devices", "networkInterfaceMultiqueue"), True)]


def test_a_list_knob_edits_the_item_the_finding_points_at() -> None:
    text = yaml.safe_dump(yaml.safe_load(VM_WITH_PREFERENCE.split("---")[0]))
    text = text.replace("masquerade: {}", "masquerade: {}\n            model: e1000")
    # with its instancetype and preference: no fix is made from a partial view
    text += "---\n" + VM_WITH_PREFERENCE.split("---\n")[1] + "---\n" + WELL_TUNED_PREFERENCE
    (item,), _names = frontend.render([read_file("vm.yaml", text.encode())])
    domain = Domain.parse(item.xml, "x")
    model = domain.root.find("devices/interface/model")
    place = item.place("NET004", model, domain)
    assert place.field == "spec.template.spec.domain.devices.interfaces[0].model"
    assert place.edits is not None and place.edits[0].value == "virtio"


def test_a_value_from_the_preference_is_said_to_come_from_it() -> None:
    text = VM_WITH_PREFERENCE + "---\n" + WELL_TUNED_PREFERENCE.replace("preferredDiskBus: virtio",
                                                                       "preferredDiskBus: sata")
    (item,), _names = frontend.render([read_file("vm.yaml", text.encode())])
    place = item.place("DSK004", None, Domain.parse(item.xml, "x"))
    assert "the value comes from preference windows.2k22.virtio" in place.advice
    assert "a VM-level field overrides the preference" in place.advice
    assert place.edits is not None and place.edits[0].path[-2:] == ("disk", "bus")


def test_yamldoc_never_takes_a_later_documents_node_for_an_earlier_ones() -> None:
    """A freed document's node ids are reused by the next document's nodes: the alias table
    must not outlive its document (a VM's values appeared in its preference's document)."""
    from vmtune.stacks.yamldoc import load

    text = VM_WITH_PREFERENCE + "---\n" + WELL_TUNED_PREFERENCE
    assert [d.root.value for d in load(text.encode(), "x.yaml")] == list(yaml.safe_load_all(text))


def test_manifest_values_are_data_in_the_rendered_domain() -> None:
    """A name, model or timezone from a stranger's manifest cannot add elements to the domain
    the rules read (the renderer builds text: every value is escaped)."""
    from vmtune.facts.domain import Domain

    hostile = '"/><memballoon model="none"/><x a="'
    spec = copy.deepcopy(WINDOWS)
    spec["domain"]["devices"]["interfaces"][0]["model"] = hostile
    spec["domain"]["clock"] = {"timezone": "</clock><clock offset='localtime'>", "timer": {}}
    spec["domain"]["devices"]["disks"][0]["name"] = hostile
    spec["volumes"][0]["name"] = hostile
    xml = render(spec, "<name>&", "ns")
    domain = Domain.parse(xml, "x.xml")
    assert domain.root.findtext("name") == "ns_<name>&"
    assert len(domain.root.findall("devices/memballoon")) == 1
    assert domain.root.find("devices/interface/model").get("type") == hostile
    assert domain.root.find("clock").get("offset") == "timezone"


def test_attribute_values_are_quoted_and_escaped_the_same_when_remembered() -> None:
    """render._attr remembers the quoted form of short texts: True after 1 (equal as dict keys)
    stays "True", and an escaped text is escaped again on its second use."""
    from vmtune.stacks.kubevirt.render import _attrs

    for _ in range(2):
        assert _attrs(a=1, b=True, c="1", d='x"<&>\n', e=None, f=2.0) == \
            ' a="1" b="True" c="1" d="x&quot;&lt;&amp;&gt;&#10;" f="2.0"'


# -- the OS the manifest states (common-templates labels, annotations, template names) --------------

STATED_OS_VM = """apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: vm
{labels}spec:
  runStrategy: Always
  template:
{template_meta}    spec:
      domain:
        cpu: {{cores: 4}}
        memory: {{guest: 4Gi}}
        devices: {{}}
"""


def _stated(labels: str = "", template_meta: str = "") -> tuple[Any, dict[str, Any]]:
    from vmtune.stacks.frontend import check_rendered

    text = STATED_OS_VM.format(labels=labels, template_meta=template_meta)
    (item,) = frontend.render([read_file("vm.yaml", text.encode())])[0]
    domain, placed = check_rendered(item, options())
    return domain, {p.finding.rule.code: p.finding for p in placed}


@pytest.mark.parametrize("labels, template_meta, os_id", [
    ('  labels:\n    os.template.kubevirt.io/rhel9.0: "true"\n', "", "http://redhat.com/rhel/9.0"),
    ("", "    metadata:\n      annotations:\n        vm.kubevirt.io/os: centos-stream9\n",
     "http://centos.org/centos-stream/9"),
    ("  labels:\n    vm.kubevirt.io/template: fedora-server-small\n", "", None),
    ('  labels:\n    os.template.kubevirt.io/win2k22: "true"\n', "", "http://microsoft.com/win/2k22"),
    ("", "    metadata:\n      annotations:\n        vm.kubevirt.io/os: windows10\n", "http://microsoft.com/win/10"),
])
def test_the_os_a_manifest_states_is_the_os_its_domain_is_judged_with(labels: str, template_meta: str,
                                                                    os_id: str | None) -> None:
    """Was: only a preference's name told the OS, so 25 of the 30 Linux common templates missed
    the HPET warning, and a Windows VM without a preference was not recognised."""
    domain, found = _stated(labels, template_meta)
    assert domain.libosinfo_id == os_id
    if "win" in labels + template_meta:
        assert domain.is_windows
        assert found["HV001"].severity is Severity.WARNING and found["CLK002"].severity is Severity.WARNING
    else:
        assert domain.is_linux
        assert found["CLK003"].severity is Severity.WARNING  # KubeVirt exposes the HPET by default
        text = STATED_OS_VM.format(labels=labels, template_meta=template_meta).splitlines()
        assert found["CLK003"].line == text.index("      domain:") + 1  # where clock.timer.hpet is added


def test_a_manifest_stating_no_os_gets_no_os_specific_finding() -> None:
    domain, found = _stated()
    assert domain.os_family is None and not {"CLK003", "HV001", "CLK002"} & set(found)


def test_an_openshift_templates_os_label_reaches_its_vm() -> None:
    template = """apiVersion: template.openshift.io/v1
kind: Template
metadata:
  name: rhel8-server-small
  labels:
    os.template.kubevirt.io/rhel8.10: "true"
objects:
- apiVersion: kubevirt.io/v1
  kind: VirtualMachine
  metadata:
    name: ${NAME}
  spec:
    template:
      spec:
        domain:
          cpu: {cores: 2}
          memory: {guest: 2Gi}
          devices: {}
parameters:
- name: NAME
  value: rhel8
"""
    (vmi,) = objects.find([yaml.safe_load(template)]).vmis
    assert vmi.os_hint == "rhel8.10"
    (item,) = frontend.render([read_file("t.yaml", template.encode())])[0]
    assert (item.os_family, item.os_id) == ("linux", "http://redhat.com/rhel/8.10")
