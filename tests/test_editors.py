"""docs/editors.md: the XML language server most editors use (Eclipse LemMinX, behind VS Code's
vscode-xml, Neovim's and Emacs' `lemminx`) validates domain files against libvirt's own RelaxNG
schema with the documented `xml.fileAssociations`, and vmtune's SARIF points editors' SARIF
viewers at the right file and line.

LemMinX is not on Maven Central (it is published on repo.eclipse.org) nor in Debian, so the test
runs the server found in $VMTUNE_LEMMINX, else ~/.cache/vmtune-test-lemminx (a directory of
jars: tests/lemminx/build.sh makes one from a LemMinX source checkout), and skips without one.
It talks to the server as an editor does: LSP's JSON-RPC over stdio.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import DOMAINS, ROOT, run_vmtune

DOMAIN_RNG = Path("/usr/share/libvirt/schemas/domain.rng")
LEMMINX = Path(os.environ.get("VMTUNE_LEMMINX", Path.home() / ".cache" / "vmtune-test-lemminx"))
EDITORS = ROOT / "docs" / "editors.md"


def _documented_settings() -> dict[str, Any]:
    """The settings block of docs/editors.md, as a user pastes it into settings.json."""
    text = EDITORS.read_text()
    block = text.split("```json\n", 1)[1].split("```", 1)[0]
    return dict(json.loads(block))


class Server:
    """A language server on stdio: Content-Length framed JSON-RPC messages."""

    def __init__(self, args: list[str], cwd: Path) -> None:
        self.proc = subprocess.Popen(args, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL)
        self.next_id = 0
        self.buffer = b""
        self.notifications: list[dict[str, Any]] = []

    def send(self, message: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def _read(self, deadline: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        while True:
            head, sep, rest = self.buffer.partition(b"\r\n\r\n")
            if sep:
                length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                                  if line.lower().startswith(b"content-length")))
                if len(rest) >= length:
                    self.buffer = rest[length:]
                    return dict(json.loads(rest[:length]))
            ready, _, _ = select.select([self.proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
            assert ready, "the language server did not answer within 120 s"
            chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
            assert chunk, "the language server exited"
            self.buffer += chunk

    def request(self, method: str, params: dict[str, Any]) -> Any:
        self.next_id += 1
        self.send({"id": self.next_id, "method": method, "params": params})
        deadline = time.monotonic() + 120
        while True:
            message = self._read(deadline)
            if message.get("id") == self.next_id and "method" not in message:
                assert "error" not in message, message
                return message.get("result")
            if "id" in message and "method" in message:  # a request from the server: answer it
                self.send({"id": message["id"], "result": None})
            else:
                self.notifications.append(message)

    def diagnostics(self, uri: str) -> list[dict[str, Any]]:
        """The diagnostics the server publishes for uri once it has validated it."""
        deadline = time.monotonic() + 120
        while True:
            for message in self.notifications:
                if message.get("method") == "textDocument/publishDiagnostics" and message["params"]["uri"] == uri:
                    self.notifications.remove(message)
                    return list(message["params"]["diagnostics"])
            message = self._read(deadline)
            if "id" in message and "method" in message:
                self.send({"id": message["id"], "result": None})
            else:
                self.notifications.append(message)

    def close(self) -> None:
        try:
            self.request("shutdown", {})
            self.send({"method": "exit"})
            self.proc.wait(timeout=20)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()


@pytest.mark.slow
def test_lemminx_validates_a_domain_against_libvirts_schema_with_the_documented_settings(tmp_path: Path) -> None:
    java = shutil.which("java")
    jars = sorted(LEMMINX.glob("*.jar")) if LEMMINX.is_dir() else []
    if java is None or not any(j.name.startswith("org.eclipse.lemminx") for j in jars):
        pytest.skip(f"no LemMinX in {LEMMINX} (tests/lemminx/build.sh) or no java")
    if not DOMAIN_RNG.exists():
        pytest.skip(f"{DOMAIN_RNG} missing: apt-get install libvirt-daemon (or libvirt-clients)")
    settings = _documented_settings()
    associations = settings["xml.fileAssociations"]
    assert associations == [{"pattern": "domains/**.xml", "systemId": str(DOMAIN_RNG)}]
    workspace = tmp_path / "infra"
    (workspace / "domains").mkdir(parents=True)
    good = workspace / "domains" / "linux-tuned.xml"
    shutil.copy(DOMAINS / "linux-tuned.xml", good)
    bad = workspace / "domains" / "web" / "typo.xml"  # a folder deeper: the pattern takes both
    bad.parent.mkdir()
    bad.write_text(good.read_text().replace("<vcpu", "<vcpus", 1).replace("</vcpu>", "</vcpus>", 1))
    other = workspace / "pom.xml"  # outside the pattern: never held to the domain schema
    other.write_text("<project><x/></project>\n")

    server = Server([java, "-cp", os.pathsep.join(str(j) for j in jars), "org.eclipse.lemminx.XMLServerLauncher"],
                    cwd=tmp_path)
    try:
        # vscode-xml sends its settings as initializationOptions.settings and again on change.
        xml = {"fileAssociations": associations}
        server.request("initialize", {"processId": os.getpid(), "rootUri": workspace.as_uri(),
                                      "capabilities": {"textDocument": {"publishDiagnostics": {}}},
                                      "initializationOptions": {"settings": {"xml": xml}}})
        server.send({"method": "initialized", "params": {}})
        server.send({"method": "workspace/didChangeConfiguration", "params": {"settings": {"xml": xml}}})
        found = {}
        for path in (good, bad, other):
            server.send({"method": "textDocument/didOpen", "params": {"textDocument": {
                "uri": path.as_uri(), "languageId": "xml", "version": 1, "text": path.read_text()}}})
            found[path.name] = server.diagnostics(path.as_uri())
    finally:
        server.close()
    # A valid domain: nothing. pom.xml, outside the pattern: only LemMinX's "no grammar" hint.
    assert found["linux-tuned.xml"] == []
    assert [(d["severity"], d["code"]) for d in found["pom.xml"]] == [(4, "NoGrammarConstraints")]
    # The typo: errors from libvirt's schema on its line (<vcpus> exists, for hotplug, without
    # attributes or text), one naming the element libvirt expected.
    line = next(i for i, text in enumerate(bad.read_text().splitlines(), 1) if "<vcpus" in text)
    errors = [(d["range"]["start"]["line"] + 1, d["message"]) for d in found["typo.xml"] if d["severity"] == 1]
    assert errors and {n for n, _ in errors} == {line}, found["typo.xml"]
    assert (line, 'found attribute "placement", but no attributes allowed here') in errors
    assert any('expected the element end-tag or element "vcpu"' in m for _, m in errors), errors


def test_sarif_locations_resolve_to_the_files_and_lines_an_editor_opens(tmp_path: Path) -> None:
    """What a SARIF viewer (VS Code's SARIF Viewer) needs to put a result on a line: a URI
    relative to the repository's top, the folder the editor has open, wherever the command ran
    from, and a line of that file."""
    infra = tmp_path / "infra"
    (infra / "domains" / "web").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(infra)], check=True)
    shutil.copy(DOMAINS / "win10-timer-storm.xml", infra / "domains" / "web" / "win10.xml")
    sarif = infra / "vmtune.sarif"
    done = run_vmtune("check", "--isolated", "-f", "sarif", "-o", str(sarif), "web", cwd=infra / "domains")
    assert done.returncode == 1, done.stderr
    results = json.loads(sarif.read_text())["runs"][0]["results"]
    assert len(results) == 5
    lines = (infra / "domains" / "web" / "win10.xml").read_text().splitlines()
    for result in results:
        location = result["locations"][0]["physicalLocation"]
        assert location["artifactLocation"] == {"uri": "domains/web/win10.xml"}
        assert 1 <= location["region"]["startLine"] <= len(lines)
