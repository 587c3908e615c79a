"""`--instancetypes DIR` on a checkout of kubevirt/common-instancetypes in its kustomize layout
(issue 50, item 1): names made by nameSuffix and JSON patches, specs by components' patches, read
without running kustomize, bounded and never outside DIR. Held to `kubectl kustomize` where it
is installed (the fixture; the real checkout when VMTUNE_TEST_COMMON_INSTANCETYPES names one)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from vmtune.stacks.kubevirt import reflayout

from conftest import FIXTURES, run_vmtune

LAYOUT = FIXTURES / "stacks" / "kubevirt" / "instancetypes-layout"
BUNDLE = FIXTURES / "stacks" / "kubevirt" / "instancetypes"  # the same commit, as `kubectl kustomize` built it

VM = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: win
spec:
  instancetype:
    name: cx1.large
  preference:
    name: windows.2k22.virtio
  runStrategy: Always
  template:
    spec:
      domain:
        devices: {}
      volumes:
        - name: root
          containerDisk:
            image: example.com/win:latest
"""


def _by_key(objects: list[Any]) -> dict[tuple[str, str], Any]:
    return {(o["kind"], o["metadata"]["name"]): o for o in objects if isinstance(o, dict)}


def _kubectl_build(directory: Path) -> dict[tuple[str, str], Any]:
    done = subprocess.run(["kubectl", "kustomize", str(directory)], capture_output=True, text=True, check=True,
                          timeout=120)
    return _by_key(list(yaml.safe_load_all(done.stdout)))


def test_the_layout_builds_the_names_and_specs_kustomize_makes() -> None:
    built = _by_key(reflayout.build(str(LAYOUT)))
    assert len(built) == 60
    # a name from nameSuffix over a JSON patch of /metadata/name, a spec from components' patches
    pref = built["VirtualMachineClusterPreference", "windows.2k22.virtio"]["spec"]
    assert pref["devices"]["preferredDiskBus"] == "virtio"
    assert pref["features"]["preferredHyperv"]["spinlocks"] == {"spinlocks": 8191}
    assert pref["clock"]["preferredTimer"]["hpet"] == {"present": False}
    # an instancetype from sizes.yaml with its series' patch (cx1.yaml) merged
    cx1 = built["VirtualMachineClusterInstancetype", "cx1.large"]["spec"]
    assert cx1["cpu"]["dedicatedCPUPlacement"] is True and cx1["memory"]["hugepages"] == {"pageSize": "2Mi"}
    assert ("VirtualMachineInstancetype", "cx1.large") in built  # the layout's /kind JSON patch
    assert not {name for _kind, name in built} & {"u", "cx", "metadata", "requirements", "hyperv"}


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_the_layout_is_what_kubectl_kustomize_builds() -> None:
    assert _by_key(reflayout.build(str(LAYOUT))) == _kubectl_build(LAYOUT)


@pytest.mark.skipif(not os.environ.get("VMTUNE_TEST_COMMON_INSTANCETYPES") or shutil.which("kubectl") is None,
                    reason="VMTUNE_TEST_COMMON_INSTANCETYPES names no checkout of kubevirt/common-instancetypes, "
                           "or kubectl is not installed")
def test_a_real_checkout_is_what_kubectl_kustomize_builds() -> None:
    checkout = Path(os.environ["VMTUNE_TEST_COMMON_INSTANCETYPES"])
    mine = _by_key(reflayout.build(str(checkout)))
    assert len(mine) > 100
    assert mine == _kubectl_build(checkout)


def _findings(tmp_path: Path, *refs: str) -> list[tuple[str, str, int, str]]:
    vm = tmp_path / "vm.yaml"
    vm.write_text(VM)
    args = [a for ref in refs for a in ("--instancetypes", ref)]
    done = run_vmtune("check", "--isolated", "-f", "json", *args, str(vm))
    assert done.returncode in (0, 1), done.stderr
    return [(f["rule"], f["severity"], f["line"], f["message"]) for f in json.loads(done.stdout)["findings"]]


def test_a_vm_is_judged_with_the_layout_as_with_the_bundle_it_builds(tmp_path: Path) -> None:
    with_layout = _findings(tmp_path, str(LAYOUT))
    assert with_layout == _findings(tmp_path, str(BUNDLE / "common-instancetypes-cluster-instancetypes.yaml"),
                                    str(BUNDLE / "common-instancetypes-cluster-preferences.yaml"))
    # found: neither "not found" nor "assumed as the built-in table defines it"
    assert not [f for f in with_layout if f[0] == "STK001" or f[3].startswith("assumed: preference")]
    assert not {"CLK001", "CLK002", "HV001", "DSK004", "NET004"} & {f[0] for f in with_layout}


def _layout(tmp_path: Path, kustomization: str) -> Path:
    root = tmp_path / "types"
    root.mkdir()
    (root / "kustomization.yaml").write_text(kustomization)
    return root


@pytest.mark.parametrize(("kustomization", "error"), [
    ("resources:\n  - ../outside\n", "../outside: outside "),
    ("resources:\n  - https://github.com/kubevirt/common-instancetypes\n",
     "https://github.com/kubevirt/common-instancetypes: a remote resource, which vmtune does not fetch"),
    ("resources:\n  - ./a.yaml\nreplacements:\n  - path: r.yaml\n",
     "replacements: a kustomize field vmtune does not read"),
    ("resources:\n  - ./link\n", "./link: outside "),
])
def test_a_layout_leaving_the_directory_or_beyond_vmtune_is_exit_2(tmp_path: Path, kustomization: str,
                                                                   error: str) -> None:
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "kustomization.yaml").write_text("resources: []\n")
    (tmp_path / "secret.yaml").write_text("kind: VirtualMachineClusterPreference\nmetadata: {name: x}\n")
    root = _layout(tmp_path, kustomization)
    (root / "a.yaml").write_text("kind: VirtualMachineClusterPreference\nmetadata: {name: a}\n")
    (root / "link").symlink_to(tmp_path / "secret.yaml")
    vm = tmp_path / "vm.yaml"
    vm.write_text(VM)
    done = run_vmtune("check", "--instancetypes", str(root), str(vm))
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert error in line and "kustomization.yaml" in line, line


def test_a_fifo_in_the_layout_is_refused_not_waited_on(tmp_path: Path) -> None:
    # a layout's resource that is a FIFO blocked the read for ever (open() waits for a writer)
    import sys

    root = _layout(tmp_path, "resources:\n  - ./types.yaml\n")
    os.mkfifo(root / "types.yaml")
    vm = tmp_path / "vm.yaml"
    vm.write_text(VM)
    # given relative, as typed in the directory above it (that was a traceback: types/types/...)
    done = subprocess.run([sys.executable, "-m", "vmtune", "check", "--instancetypes", "types", "vm.yaml"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("vmtune: ") and "types.yaml" in line and "not a regular file" in line, line


def test_a_relative_layout_directory_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `--instancetypes types` from the directory above it: it was joined to itself (types/types/...)
    root = _layout(tmp_path, "resources:\n  - ./a.yaml\n")
    (root / "a.yaml").write_text("apiVersion: instancetype.kubevirt.io/v1beta1\nkind: VirtualMachineClusterPreference\n"
                                 "metadata:\n  name: a\n")
    monkeypatch.chdir(tmp_path)
    assert list(_by_key(reflayout.build("types"))) == [("VirtualMachineClusterPreference", "a")]
