"""The parsed-YAML cache: it saves the YAML parser and schema validator, and is never stale."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_startup import imported

from vmtune import cache
from vmtune.errors import VmtuneError
from vmtune.policy.load import parse_policy_text

from conftest import ROOT, domain_xml, run_vmtune

CONFIG = "policies: [default]\nignore: [USB001, USB002]\n"
# A USB tablet without graphics on a polled UHCI controller: USB001 and USB002 (warnings)
# unless the configuration ignores them.
TABLET = domain_xml(devices="<controller type='usb' model='piix3-uhci'/>\n    <input type='tablet' bus='usb'/>")


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("VMTUNE_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / ".vmtune.yaml").write_text(CONFIG)
    (tmp_path / "repo" / "vm.xml").write_text(TABLET)
    return tmp_path / "repo"


def test_a_cached_configuration_needs_neither_yaml_nor_jsonschema(repo: Path) -> None:
    assert imported("check", "vm.xml", cwd=repo) == "IMPORTED ['jsonschema', 'yaml'] EXIT 0"
    assert imported("check", "vm.xml", cwd=repo) == "IMPORTED [] EXIT 0"


def test_a_cached_configuration_naming_files_needs_no_yaml(repo: Path) -> None:
    """A CI configuration names its host facts and policies: where they are written (the line of
    an error, which needs PyYAML) is looked up only for an error."""
    (repo / "caps.xml").write_text((ROOT / "fixtures" / "hosts" / "intel-2node.xml").read_text())
    (repo / "house.yaml").write_text("extends: default\nrules:\n  - ignore: [USB001]\n")
    (repo / ".vmtune.yaml").write_text("policies: [house.yaml]\nhost: caps.xml\nignore: [USB002]\n")
    assert imported("check", "vm.xml", cwd=repo) == "IMPORTED ['jsonschema', 'yaml'] EXIT 0"
    assert imported("check", "vm.xml", cwd=repo) == "IMPORTED [] EXIT 0"
    (repo / ".vmtune.yaml").write_text("policies: [house.yaml]\n\nhost: ../caps.xml\n")
    result = run_vmtune("check", "vm.xml", cwd=repo)
    assert result.returncode == 2 and "/.vmtune.yaml:3: host '../caps.xml' is outside the repository" in result.stderr


def test_an_edited_configuration_is_read_again(repo: Path) -> None:
    assert imported("check", "vm.xml", cwd=repo).endswith("EXIT 0")
    (repo / ".vmtune.yaml").write_text("policies: [default]\n")  # USB001/USB002 no longer ignored
    assert imported("check", "vm.xml", cwd=repo) == "IMPORTED ['jsonschema', 'yaml'] EXIT 1"


def test_a_corrupt_cache_entry_is_ignored_and_replaced(repo: Path, tmp_path: Path) -> None:
    imported("check", "vm.xml", cwd=repo)
    entries = list((tmp_path / "cache").glob("parsed-*.marshal"))
    assert entries
    for entry in entries:
        entry.write_bytes(b"\x00garbage")
    assert imported("check", "vm.xml", cwd=repo) == "IMPORTED ['jsonschema', 'yaml'] EXIT 0"
    assert imported("check", "vm.xml", cwd=repo) == "IMPORTED [] EXIT 0"


def test_no_cache_when_turned_off(repo: Path, tmp_path: Path) -> None:
    env = {"VMTUNE_NO_CACHE": "1"}
    imported("check", "vm.xml", cwd=repo, env=env)
    assert imported("check", "vm.xml", cwd=repo, env=env) == "IMPORTED ['jsonschema', 'yaml'] EXIT 0"
    assert not (tmp_path / "cache").exists()


def test_an_invalid_file_is_never_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VMTUNE_CACHE_DIR", str(tmp_path))
    for _ in range(2):
        with pytest.raises(VmtuneError, match="unknown key 'rulez'"):
            parse_policy_text("rulez: []\n", "bad.yaml", trusted=False)
    assert not list(tmp_path.iterdir())


def test_the_key_covers_the_schema(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same text validated against another schema is not a hit."""
    monkeypatch.setenv("VMTUNE_CACHE_DIR", str(tmp_path))
    text = "rules: []\n"
    assert parse_policy_text(text, "p.yaml", trusted=False) == {"rules": []}
    strict = {"type": "object", "additionalProperties": False, "properties": {}}
    with pytest.raises(VmtuneError):
        parse_policy_text(text, "p.yaml", trusted=False, schema_data=strict)


def test_an_unwritable_cache_directory_only_costs_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("VMTUNE_CACHE_DIR", str(blocker / "below-a-file"))
    cache.store("x", "key", {"a": 1})
    assert cache.lookup("x", "key") is None
    assert parse_policy_text("rules: []\n", "p.yaml", trusted=False) == {"rules": []}


def test_re2_is_loaded_only_for_a_configuration_with_a_pattern(repo: Path) -> None:
    """google-re2 compiles `matches:` patterns at load time (a bad one is the policy's error);
    a configuration without one never imports it, cached or not."""
    assert "'re2'" not in imported("check", "vm.xml", cwd=repo)
    (repo / ".vmtune.yaml").write_text(CONFIG + "checks:\n  - code: XRE001\n    name: mac-format\n"
                                       "    severity: info\n    message: m\n    select: devices/interface\n"
                                       "    assert: {path: mac, attribute: address, matches: '52:54:.*'}\n")
    imported("check", "vm.xml", cwd=repo)
    assert imported("check", "vm.xml", cwd=repo) == "IMPORTED ['re2'] EXIT 0"


def test_a_cache_others_can_write_is_not_trusted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache decides what vmtune believes (and marshal is not safe against crafted data):
    a directory or entry another user could have written is ignored, never read."""
    import os

    directory = tmp_path / "cache"
    monkeypatch.setenv("VMTUNE_CACHE_DIR", str(directory))
    cache.store("x", "key", {"a": 1})
    assert cache.lookup("x", "key") == {"a": 1}
    directory.chmod(0o777)  # a shared /tmp-style directory
    assert cache.lookup("x", "key") is None
    cache.store("y", "key", {"b": 2})
    assert len(list(directory.iterdir())) == 1  # nothing written there
    directory.chmod(0o700)
    (entry,) = directory.iterdir()
    entry.chmod(0o666)
    assert cache.lookup("x", "key") is None
    entry.chmod(0o600)
    assert cache.lookup("x", "key") == {"a": 1}
    if os.geteuid() == 0:  # root: an entry planted by another user
        os.chown(entry, 65534, 65534)
        assert cache.lookup("x", "key") is None
        os.chown(entry, 0, 0)
    link = tmp_path / "link"
    link.symlink_to(directory)
    monkeypatch.setenv("VMTUNE_CACHE_DIR", str(link))
    assert cache.lookup("x", "key") is None  # reached through a symlink
