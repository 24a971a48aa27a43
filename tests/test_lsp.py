"""The language server, driven as an editor drives it: JSON-RPC over pipes.

One test starts ``python -m fixitem lsp`` as a subprocess (the command an
editor runs); the others run the same server in a thread of this process
(the same protocol over os pipes, without paying for a process start), so
that they can shorten the debounce and count engine runs.
"""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import typer.main
from fixitem.codemods import graph_break_codes
from fixitem.codemods.driver.registry import rule_class
from pygls.workspace.position_codec import PositionCodec

from fixitem import api
from fixitem.cli import app
from fixitem.config import tomllib
from fixitem.lsp import (
    FIX_ALL,
    NOTEBOOK_SYNC,
    Lines,
    _client_unsafe,
    create_server,
    minimal_edit,
    serve,
    text_edit,
)

TIMEOUT = 20.0

MODEL = """\
import torch
from torch import nn


class Gate(nn.Module):
    def forward(self, x, y):
        if x.sum().item() > 0: y = y * 2
        return y + x
"""

CLEAN = MODEL.replace("        if x.sum().item() > 0: y = y * 2\n", "        y = y * 2\n")

# A finding whose only fix is unsafe (see FX rule clamp-min-max's examples).
UNSAFE = """\
import torch


def f(loss: torch.Tensor):
    lr = min(loss.item(), 0.1)
    return lr
"""


class Client:
    """A minimal LSP client: Content-Length framed JSON-RPC, requests answered in order."""

    def __init__(self, reader, writer) -> None:
        self.reader, self.writer = reader, writer
        self.next_id = 0
        self.responses: dict[int, dict] = {}
        self.notifications: queue.Queue[dict] = queue.Queue()
        self.server_requests: list[dict] = []
        self.skipped: list[dict] = []  # notifications passed over while waiting for diagnostics
        self.configuration: object = None  # the answer to workspace/configuration
        self.lock = threading.Condition()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        while True:
            length = None
            while True:
                line = self.reader.readline()
                if not line:
                    return
                if line in (b"\r\n", b"\n"):
                    break
                name, _, value = line.decode("ascii").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            assert length is not None
            message = json.loads(self.reader.read(length))
            if "method" in message and "id" in message:  # a request from the server
                self.server_requests.append(message)
                result = [self.configuration] if message["method"] == "workspace/configuration" else None
                self._send({"jsonrpc": "2.0", "id": message["id"], "result": result})
            elif "method" in message:
                self.notifications.put(message)
            else:
                with self.lock:
                    self.responses[message["id"]] = message
                    self.lock.notify_all()

    def _send(self, message: dict) -> None:
        body = json.dumps(message).encode("utf-8")
        self.writer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.writer.flush()

    def notify(self, method: str, params: object) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method: str, params: object) -> object:
        self.next_id += 1
        ident = self.next_id
        self._send({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
        with self.lock:
            assert self.lock.wait_for(lambda: ident in self.responses, TIMEOUT), f"no answer to {method}"
            response = self.responses.pop(ident)
        assert "error" not in response, response
        return response["result"]

    def diagnostics(self, uri: str, timeout: float = TIMEOUT) -> dict:
        """The next publishDiagnostics for ``uri`` (other notifications are skipped)."""
        deadline = time.monotonic() + timeout
        while True:
            message = self.notifications.get(timeout=max(0.01, deadline - time.monotonic()))
            if message["method"] == "textDocument/publishDiagnostics" and message["params"]["uri"] == uri:
                return message["params"]
            self.skipped.append(message)

    def no_diagnostics_for(self, seconds: float) -> bool:
        try:
            while True:
                message = self.notifications.get(timeout=seconds)
                if message["method"] == "textDocument/publishDiagnostics":
                    return False
        except queue.Empty:
            return True

    def initialize(self, root: Path, options: object = None, capabilities: dict | None = None) -> dict:
        result = self.request("initialize", {
            "processId": os.getpid(),
            "rootUri": root.as_uri(),
            "capabilities": capabilities or {"workspace": {"configuration": True}},
            "initializationOptions": options,
        })
        self.notify("initialized", {})
        return result

    def open(self, path: Path, text: str, version: int = 1) -> str:
        uri = path.as_uri()
        self.notify("textDocument/didOpen", {
            "textDocument": {"uri": uri, "languageId": "python", "version": version, "text": text},
        })
        return uri

    def change(self, uri: str, text: str, version: int) -> None:
        self.notify("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}],
        })

    def code_actions(self, uri: str, rng: dict, only: list[str] | None = None, ignores: bool = False) -> list[dict]:
        """The code actions for ``rng``; without ``ignores``, less the "ignore on this line" ones."""
        context: dict = {"diagnostics": []}
        if only:
            context["only"] = only
        actions = self.request(
            "textDocument/codeAction", {"textDocument": {"uri": uri}, "range": rng, "context": context}
        )
        return [a for a in actions if ignores or not a["title"].startswith("fixitem: ignore ")]

    def close(self) -> None:
        assert self.request("shutdown", None) is None
        self.notify("exit", None)


def offset(text: str, position: dict) -> int:
    """An LSP position (UTF-16 code units, the protocol's default) as an offset into ``text``."""
    lines = text.split("\n")
    line = lines[position["line"]]
    units = 0
    for index, char in enumerate(line):
        if units >= position["character"]:
            return sum(len(row) + 1 for row in lines[: position["line"]]) + index
        units += 2 if ord(char) > 0xFFFF else 1
    return sum(len(row) + 1 for row in lines[: position["line"]]) + len(line)


def apply_edit(text: str, edit: dict, uri: str) -> str:
    """Apply a WorkspaceEdit's edits for ``uri`` (``changes`` or ``documentChanges``), last first."""
    edits = edit.get("changes", {}).get(uri, [])
    for change in edit.get("documentChanges", []):
        if change["textDocument"]["uri"] == uri:
            edits.extend(change["edits"])
    spans = sorted(((offset(text, e["range"]["start"]), offset(text, e["range"]["end"]), e["newText"]) for e in edits),
                   reverse=True)
    for start, end, new in spans:
        text = text[:start] + new + text[end:]
    return text


def written_by_apply(tmp: Path, name: str, text: str) -> str:
    """What ``fixitem.apply`` writes for a file holding ``text``."""
    folder = tmp / "by-apply"
    folder.mkdir(exist_ok=True)
    (folder / ".git").mkdir(exist_ok=True)  # no configuration from above
    target = folder / name
    target.write_text(text, encoding="utf-8")
    result = api.apply([target], cache=False)
    assert not result.errors
    return target.read_text(encoding="utf-8")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / ".git").mkdir()  # the top of the project: configuration is not looked for above it
    return root


# --------------------------------------------------------------------------- the command an editor runs


@contextmanager
def lsp_process(project: Path) -> Iterator[Client]:
    """``python -m fixitem lsp`` started in ``project`` as an editor starts it, with a client on its stdio;
    the session must end with shutdown and exit (status 0)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(Path.cwd()), os.environ.get("PYTHONPATH")]))}
    process = subprocess.Popen(
        [sys.executable, "-m", "fixitem", "lsp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, cwd=project, env=env,
    )
    try:
        client = Client(process.stdout, process.stdin)
        yield client
        client.close()
        assert process.wait(timeout=TIMEOUT) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stdout.close()
        process.stdin.close()
        process.stderr.close()


def test_session_with_python_m_fixitem_lsp(project: Path, tmp_path: Path) -> None:
    model = project / "model.py"
    model.write_text("x = 1\n", encoding="utf-8")  # the editor's text differs: the server must use that
    with lsp_process(project) as client:
        init = client.initialize(project)
        capabilities = init["capabilities"]
        assert capabilities["codeActionProvider"]["codeActionKinds"] == ["quickfix", FIX_ALL]
        assert capabilities["textDocumentSync"]["openClose"] is True
        assert capabilities["textDocumentSync"]["save"] is not None
        assert init["serverInfo"]["name"] == "fixitem"

        uri = client.open(model, MODEL)
        published = client.diagnostics(uri)
        assert published["version"] == 1
        [diag] = published["diagnostics"]
        line = MODEL.splitlines().index("        if x.sum().item() > 0: y = y * 2")
        assert diag["code"] == "FX101"
        assert diag["source"] == "fixitem"
        assert diag["severity"] == 2  # Warning
        assert diag["range"] == {"start": {"line": line, "character": 8},
                                 "end": {"line": line, "character": len("        if x.sum().item() > 0: y = y * 2")}}
        assert diag["message"].startswith("`if x.sum().item() > 0:` reads a tensor value on the host")
        assert "(graph break, host sync)" in diag["message"] and "[fix: safe]" in diag["message"]
        codes = rule_class("FX101").graph_breaks
        if codes:
            assert diag["codeDescription"]["href"] == graph_break_codes.url(codes[0])
        else:
            assert "codeDescription" not in diag
        assert diag["data"] == {"rule": "FX101", "line": line + 1, "col": 9, "fix": "safe"}

        cursor = {"start": {"line": line, "character": 12}, "end": {"line": line, "character": 12}}
        actions = client.code_actions(uri, cursor)
        fixes = [a for a in actions if a["kind"] == "quickfix"]
        [fix] = fixes
        assert fix["title"] == "fixitem: fix FX101 (where-if)" and fix["isPreferred"] is True
        assert fix["diagnostics"][0]["code"] == "FX101"
        [edit] = fix["edit"]["changes"][uri]
        # The edit replaces only what changed: it starts on the finding's line and ends before `return y`.
        assert edit["range"]["start"]["line"] == line and edit["range"]["end"]["line"] == line
        fixed = apply_edit(MODEL, fix["edit"], uri)
        assert fixed == written_by_apply(tmp_path, "model.py", MODEL)
        assert fixed != MODEL
        [fix_all] = [a for a in actions if a["kind"] == FIX_ALL]
        assert apply_edit(MODEL, fix_all["edit"], uri) == fixed

        client.change(uri, CLEAN, 2)
        cleared = client.diagnostics(uri)
        assert cleared == {"uri": uri, "version": 2, "diagnostics": []}
        assert client.code_actions(uri, cursor) == []
        assert model.read_text(encoding="utf-8") == "x = 1\n"  # the server never writes


# --------------------------------------------------------------------------- the same server in-process


class InProcess:
    def __init__(self, debounce_s: float = 0.3) -> None:
        to_server_r, to_server_w = os.pipe()
        from_server_r, from_server_w = os.pipe()
        self.server = create_server()
        self.server.debounce_s = debounce_s
        self._stdin = os.fdopen(to_server_r, "rb")
        self._stdout = os.fdopen(from_server_w, "wb")
        self.status: list[int] = []
        self.thread = threading.Thread(
            target=lambda: self.status.append(serve(self._stdin, self._stdout, self.server)), daemon=True
        )
        self.thread.start()
        self.client = Client(os.fdopen(from_server_r, "rb"), os.fdopen(to_server_w, "wb"))

    def stop(self) -> None:
        self.client.close()
        self.join()
        assert self.status == [0]

    def join(self) -> None:
        self.thread.join(TIMEOUT)
        assert not self.thread.is_alive()
        for stream in (self._stdin, self._stdout, self.client.writer):
            stream.close()
        self.client.thread.join(TIMEOUT)  # the server's end is closed: the client reads the end of the stream
        self.client.reader.close()


@pytest.fixture
def session():
    running = InProcess()
    yield running
    running.stop()


def test_changes_are_debounced_into_one_analysis_of_the_last_text(project: Path, session: InProcess) -> None:
    client = session.client
    client.initialize(project)
    uri = client.open(project / "model.py", CLEAN)
    assert client.diagnostics(uri)["diagnostics"] == []
    runs = session.server.analyser.runs
    for version in range(2, 12):  # typing: ten changes 20 ms apart
        client.change(uri, MODEL if version % 2 else CLEAN + "#" * version, version)
        time.sleep(0.02)
    published = client.diagnostics(uri)
    assert published["version"] == 11
    assert [d["code"] for d in published["diagnostics"]] == ["FX101"]
    assert session.server.analyser.runs == runs + 1
    assert client.no_diagnostics_for(0.5)  # nothing more follows for the older versions


def test_unchanged_text_is_not_analysed_again(project: Path, session: InProcess) -> None:
    client = session.client
    client.initialize(project)
    uri = client.open(project / "model.py", MODEL)
    first = client.diagnostics(uri)
    runs = session.server.analyser.runs
    client.change(uri, MODEL.replace("\n", "\r\n"), 2)  # the same text with other line endings
    client.notify("textDocument/didSave", {"textDocument": {"uri": uri}})
    again = client.diagnostics(uri)
    assert again["diagnostics"] == first["diagnostics"]
    assert session.server.analyser.runs == runs


def test_unsafe_fixes_only_with_the_client_setting(project: Path, session: InProcess, tmp_path: Path) -> None:
    client = session.client
    client.initialize(project)
    uri = client.open(project / "lr.py", UNSAFE)
    [diag] = client.diagnostics(uri)["diagnostics"]
    assert "[fix: unsafe]" in diag["message"] and diag["data"]["fix"] == "unsafe"
    everywhere = {"start": {"line": 0, "character": 0}, "end": {"line": 6, "character": 0}}
    assert client.code_actions(uri, everywhere) == []  # no safe fix: neither a quick fix nor "apply all"

    client.notify("workspace/didChangeConfiguration", {"settings": {"fixitem": {"unsafe": True}}})
    client.diagnostics(uri)  # the documents are analysed again with the new setting
    [fix] = client.code_actions(uri, diag["range"])
    assert fix["title"].endswith("(unsafe: review it)") and fix["isPreferred"] is False
    expected = UNSAFE.replace("min(loss.item(), 0.1)", "torch.clamp(loss.detach().reshape(()), max=0.1)")
    assert apply_edit(UNSAFE, fix["edit"], uri) == expected

    # A client that sends no settings in the notification is asked for them (workspace/configuration).
    client.configuration = {"unsafe": False}
    client.notify("workspace/didChangeConfiguration", {"settings": None})
    client.diagnostics(uri)
    assert [r["method"] for r in client.server_requests] == ["workspace/configuration"]
    assert client.code_actions(uri, diag["range"]) == []


def test_unsafe_from_initialization_options(project: Path, session: InProcess) -> None:
    client = session.client
    client.initialize(project, options={"unsafe": True})
    uri = client.open(project / "lr.py", UNSAFE)
    [diag] = client.diagnostics(uri)["diagnostics"]
    assert [a["kind"] for a in client.code_actions(uri, diag["range"])] == ["quickfix"]
    # Settings without the key (as VS Code's client sends at start) keep the initialization option.
    client.notify("workspace/didChangeConfiguration", {"settings": {"fixitem": {}}})
    client.diagnostics(uri)
    assert [a["kind"] for a in client.code_actions(uri, diag["range"])] == ["quickfix"]
    client.notify("workspace/didChangeConfiguration", {"settings": {"fixitem": {"unsafe": False}}})
    client.diagnostics(uri)
    assert client.code_actions(uri, diag["range"]) == []


def test_tool_fixitem_configuration_is_honoured(project: Path, session: InProcess) -> None:
    (project / "pyproject.toml").write_text(
        '[tool.fixitem]\nunsafe = true\n\n[tool.fixitem.per-file-ignores]\n"tests/*" = ["FX101"]\n',
        encoding="utf-8",
    )
    (project / "tests").mkdir()
    client = session.client
    client.initialize(project)
    ignored = client.open(project / "tests" / "test_model.py", MODEL)
    # FX101 does not run there, so the generic report of the `.item()` read (FX001) is what is left.
    assert [d["code"] for d in client.diagnostics(ignored)["diagnostics"]] == ["FX001"]
    checked = client.open(project / "lr.py", UNSAFE)
    [diag] = client.diagnostics(checked)["diagnostics"]
    # unsafe = true in the configuration offers the unsafe fix (the client gave no setting).
    assert [a["kind"] for a in client.code_actions(checked, diag["range"])] == ["quickfix"]

    (project / "pyproject.toml").write_text('[tool.fixitem]\nexclude = ["lr.py"]\n', encoding="utf-8")
    client.change(checked, UNSAFE + "\n", 2)  # the configuration is read again for each analysis
    assert client.diagnostics(checked)["diagnostics"] == []

    (project / "pyproject.toml").write_text('[tool.fixitem]\nselekt = ["FX1"]\n', encoding="utf-8")
    client.change(checked, UNSAFE, 3)
    assert client.diagnostics(checked)["diagnostics"] == []
    client.change(checked, UNSAFE + "\n", 4)
    assert client.diagnostics(checked)["diagnostics"] == []
    [shown] = [m["params"] for m in client.skipped if m["method"] == "window/showMessage"]
    assert shown["type"] == 1 and "unknown key 'selekt'" in shown["message"]  # an error, said once


def test_only_the_requested_kind_and_fix_all(project: Path, session: InProcess, tmp_path: Path) -> None:
    text = MODEL + "\n\ndef g(t: torch.Tensor):\n    if t.max().item() > 1: t = t / 2\n    return t\n"
    client = session.client
    client.initialize(project)
    uri = client.open(project / "two.py", text)
    assert len(client.diagnostics(uri)["diagnostics"]) == 2
    start = {"line": 0, "character": 0}
    actions = client.code_actions(uri, {"start": start, "end": start}, only=["source.fixAll"])
    [fix_all] = actions
    assert fix_all["title"] == "fixitem: apply all safe fixes"
    assert apply_edit(text, fix_all["edit"], uri) == written_by_apply(tmp_path, "two.py", text)
    assert client.code_actions(uri, {"start": start, "end": start}, only=["quickfix"]) == []


def test_edits_are_resolved_when_the_client_asks_for_them(project: Path, session: InProcess, tmp_path: Path) -> None:
    client = session.client
    client.initialize(project, capabilities={
        "textDocument": {"codeAction": {"resolveSupport": {"properties": ["edit"]}}},
        "workspace": {"workspaceEdit": {"documentChanges": True}},
    })
    uri = client.open(project / "model.py", MODEL, version=7)
    [diag] = client.diagnostics(uri)["diagnostics"]
    runs = session.server.analyser.runs
    actions = client.code_actions(uri, diag["range"])
    assert [a["kind"] for a in actions] == ["quickfix", FIX_ALL]
    assert all("edit" not in a for a in actions)  # listing the actions runs no fix
    assert session.server.analyser.runs == runs
    expected = written_by_apply(tmp_path, "model.py", MODEL)
    for action in actions:
        resolved = client.request("codeAction/resolve", action)
        [change] = resolved["edit"]["documentChanges"]
        assert change["textDocument"] == {"uri": uri, "version": 7}  # a stale edit is refused by the client
        assert apply_edit(MODEL, resolved["edit"], uri) == expected


def test_other_languages_are_left_alone(project: Path, session: InProcess) -> None:
    client = session.client
    client.initialize(project)
    uri = (project / "notes.md").as_uri()
    client.notify("textDocument/didOpen", {
        "textDocument": {"uri": uri, "languageId": "markdown", "version": 1, "text": MODEL},
    })
    assert client.diagnostics(uri)["diagnostics"] == []


def test_ignore_on_this_line(project: Path, session: InProcess) -> None:
    client = session.client
    client.initialize(project)
    uri = client.open(project / "model.py", MODEL)
    [diag] = client.diagnostics(uri)["diagnostics"]
    actions = client.code_actions(uri, diag["range"], ignores=True)
    assert [a["title"] for a in actions] == [
        "fixitem: fix FX101 (where-if)", "fixitem: apply all safe fixes", "fixitem: ignore FX101 on this line",
    ]
    ignore = actions[-1]
    assert ignore["kind"] == "quickfix" and ignore["diagnostics"][0]["code"] == "FX101"
    ignored = apply_edit(MODEL, ignore["edit"], uri)
    assert ignored == MODEL.replace("y = y * 2\n", "y = y * 2  # fixitem: ignore[FX101]\n", 1)
    client.change(uri, ignored, 2)
    assert client.diagnostics(uri)["diagnostics"] == []

    # A line that already silences other rules gets the code added to its list.
    other = MODEL.replace("y = y * 2\n", "y = y * 2  # fixitem: ignore[FX001]\n", 1)
    client.change(uri, other, 3)
    [diag] = client.diagnostics(uri)["diagnostics"]
    [ignore] = [a for a in client.code_actions(uri, diag["range"], ignores=True) if "ignore" in a["title"]]
    assert apply_edit(other, ignore["edit"], uri) == MODEL.replace(
        "y = y * 2\n", "y = y * 2  # fixitem: ignore[FX001, FX101]\n", 1
    )


def test_no_ignore_comment_inside_a_string(project: Path, session: InProcess) -> None:
    text = 'import torch\n\n\ndef f(t: torch.Tensor):\n    print(t.item(), """\n    done""")\n'
    client = session.client
    client.initialize(project)
    uri = client.open(project / "p.py", text)
    diags = client.diagnostics(uri)["diagnostics"]
    assert diags
    for diag in diags:
        titles = [a["title"] for a in client.code_actions(uri, diag["range"], ignores=True)]
        assert not any(t.startswith("fixitem: ignore") for t in titles), titles


def test_closing_clears_the_diagnostics(project: Path, session: InProcess) -> None:
    client = session.client
    client.initialize(project)
    uri = client.open(project / "model.py", MODEL)
    assert client.diagnostics(uri)["diagnostics"]
    client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    assert client.diagnostics(uri)["diagnostics"] == []


def test_exit_without_shutdown_is_status_1() -> None:
    running = InProcess()
    running.client.notify("exit", None)
    running.join()
    assert running.status == [1]


# --------------------------------------------------------------------------- positions and edits


def test_positions_are_utf16_code_units() -> None:
    text = 'x = "😀é"; y = 1\nz\n'
    lines = Lines(text, PositionCodec())  # the protocol's default: UTF-16
    y = text.index("y")
    assert lines.position(y).character == y + 1  # 😀 is two UTF-16 units, é one
    assert (lines.position(len(text)).line, lines.position(len(text)).character) == (2, 0)
    utf32 = Lines(text, PositionCodec("utf-32"))
    assert utf32.position(y).character == y


@pytest.mark.parametrize(
    "before, after, expected",
    [
        ("abc", "abc", (3, 3, "")),
        ("abc", "abXc", (2, 2, "X")),
        ("aaa", "aaaa", (3, 3, "a")),
        ("abc", "", (0, 3, "")),
        ("", "x", (0, 0, "x")),
        ("if a:\n    b\n", "c\n", (0, 11, "c")),
    ],
)
def test_minimal_edit_keeps_the_unchanged_ends(before: str, after: str, expected: tuple) -> None:
    start, end, new = minimal_edit(before, after)
    assert (start, end, new) == expected
    assert before[:start] + new + before[end:] == after


def test_text_edit_keeps_the_document_line_endings() -> None:
    before, after = "a\nbb\ncc\n", "a\nB\nB\ncc\n"
    edit = text_edit(before, after, PositionCodec(), newline="\r\n")
    assert edit.new_text == "B\r\nB"
    assert (edit.range.start.line, edit.range.start.character, edit.range.end.line, edit.range.end.character) == (
        1, 0, 1, 2
    )


def test_a_rule_with_graph_break_codes_links_to_pytorchs_page(monkeypatch: pytest.MonkeyPatch) -> None:
    from fixitem.codemods.driver.engine import Finding

    from fixitem.lsp import diagnostic

    monkeypatch.setattr(rule_class("FX001"), "graph_breaks", ("GB0124",))
    finding = Finding("m.py", 2, 5, "FX001", "item-read", "`t.item()` reads", "none", ("host-sync",),
                      end_line=2, end_col=15)
    diag = diagnostic(finding, Lines("import torch\nx = t.item() + 1\n", PositionCodec()))
    assert diag.code_description is not None
    assert diag.code_description.href == graph_break_codes.url("GB0124")
    assert (diag.range.start.line, diag.range.start.character, diag.range.end.character) == (1, 4, 14)
    assert diag.message == "`t.item()` reads (host sync) [fix: none]"


# --------------------------------------------------------------------------- the README's editor set-up


def _editor_section() -> str:
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    start = readme.index("\n## Editors\n")
    return readme[start:readme.index("\n## ", start + 1)]


def _blocks(section: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", section, flags=re.DOTALL)


def _lua_list(block: str, key: str) -> list[str]:
    match = re.search(rf"\b{key} = \{{([^}}]*)\}}", block)
    assert match, f"no {key} in {block}"
    return re.findall(r'"([^"]*)"', match.group(1))


def _lua_table_keys(block: str, key: str) -> list[str]:
    match = re.search(rf"\b{key} = \{{([^}}]*)\}}", block)
    assert match, f"no {key} in {block}"
    return re.findall(r"(\w+)\s*=", match.group(1))


def _command_ok(argv: list[str]) -> None:
    """``argv`` starts the language server: the installed script and its ``lsp`` command."""
    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    scripts = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["scripts"]
    assert argv[0] in scripts, argv
    assert argv[1:] == ["lsp"] and "lsp" in typer.main.get_command(app).commands, argv


def _reads(key: str) -> bool:
    """Whether the server reads ``key`` from initializationOptions (both values change what it does)."""
    return _client_unsafe({key: True}) is True and _client_unsafe({key: False}) is False


def test_the_readme_vs_code_settings_start_the_server_it_documents() -> None:
    [settings] = [json.loads(block) for block in _blocks(_editor_section(), "json")]
    _command_ok([settings["glspc.server.command"], *settings["glspc.server.commandArguments"]])
    languages = settings["glspc.server.languageId"]
    assert languages == ["python"]
    assert [c.language for f in NOTEBOOK_SYNC.notebook_selector for c in f.cells] == languages  # notebooks' cells too
    options = settings["glspc.server.initializationOptions"]
    assert options and all(_reads(key) for key in options), options
    assert list(settings["editor.codeActionsOnSave"]) == [FIX_ALL]


def test_the_readme_neovim_configurations_start_the_server_it_documents() -> None:
    section = _editor_section()
    blocks = [b for b, _ in _neovim_blocks()]
    assert len(blocks) == 3  # Neovim 0.11, 0.10, 0.7 to 0.10
    for block in blocks:
        _command_ok(_lua_list(block, "cmd"))
        keys = _lua_table_keys(block, "init_options")
        assert keys and all(_reads(key) for key in keys), keys
    assert _lua_list(blocks[0], "filetypes") == ["python"]
    assert all('pattern = "python"' in block for block in blocks[1:])
    assert re.findall(r'only = \{ "([^"]+)" \}', section) == [FIX_ALL]


# Where Neovim's Lua API has each function a snippet may call: (first version with it, first
# version where it is deprecated or gone; None: still there). From Neovim's `:help news` and
# `:help deprecated`; `apply` of `vim.lsp.buf.code_action` came with 0.8.
NEOVIM_API = {
    "vim.api.nvim_create_autocmd": ((0, 7), None),
    "vim.lsp.start_client": ((0, 5), (0, 11)),
    "vim.lsp.buf_attach_client": ((0, 5), None),
    "vim.lsp.start": ((0, 8), None),
    "vim.lsp.config": ((0, 11), None),
    "vim.lsp.enable": ((0, 11), None),
    "vim.fs.root": ((0, 10), None),
    "vim.fn.getcwd": ((0, 1), None),
}


def _version(text: str) -> tuple[int, int]:
    major, minor = text.split(".")
    return int(major), int(minor)


def _neovim_blocks() -> list[tuple[str, tuple[tuple[int, int], tuple[int, int] | None]]]:
    """Each Neovim snippet of the README with the versions its heading claims it for:
    ``**Neovim 0.11 or newer**``, ``**Neovim 0.10**``, ``**Neovim 0.7 to 0.10**``."""
    section = _editor_section()
    found = []
    for match in re.finditer(r"\*\*Neovim (\d+\.\d+)( or newer| to (\d+\.\d+))?\*\*.*?```lua\n(.*?)```",
                             section, flags=re.DOTALL):
        low = _version(match.group(1))
        high = None if match.group(2) == " or newer" else _version(match.group(3) or match.group(1))
        found.append((match.group(4), (low, high)))
    return found


def test_each_readme_neovim_snippet_calls_only_what_its_versions_have() -> None:
    claimed = [versions for _, versions in _neovim_blocks()]
    # Every version from 0.7 on has a snippet: Debian 12's 0.7.2 among them.
    for minor in range(7, 13):
        assert any(low <= (0, minor) and (high is None or (0, minor) <= high) for low, high in claimed), minor
    for block, (low, high) in _neovim_blocks():
        called = set(re.findall(r"\b(vim(?:\.\w+)+)\s*\(", block))
        assert called, block
        for name in called:
            assert name in NEOVIM_API, f"{name}: add when Neovim has it"
            since, until = NEOVIM_API[name]
            assert since <= low, f"{name} needs Neovim {since}, the snippet claims {low}"
            assert until is None or (high is not None and high < until), f"{name} is deprecated from {until}"
        assert "vim.fs" not in block or low >= (0, 8)  # `attempt to index field 'fs'` on 0.7
    section = _editor_section()
    assert "apply = true" in section and "on 0.7, which has no `apply`" in section


def _neovim() -> tuple[str, tuple[int, int]] | None:
    import shutil

    nvim = shutil.which("nvim")
    if nvim is None:
        return None
    first = subprocess.run([nvim, "--version"], capture_output=True, text=True, timeout=60).stdout.splitlines()[0]
    match = re.search(r"v(\d+)\.(\d+)", first)
    return (nvim, (int(match.group(1)), int(match.group(2)))) if match else None


NEOVIM_CHECK = """
local ok = vim.wait(120000, function() return #vim.diagnostic.get(0) > 0 end, 100)
local out = {}
for _, d in ipairs(vim.diagnostic.get(0)) do
  table.insert(out, (d.lnum + 1) .. ":" .. (d.col + 1) .. ": " .. d.message)
end
vim.fn.writefile(out, "diagnostics.txt")
vim.cmd("qa!")
"""


@pytest.mark.slow
def test_the_readme_neovim_snippet_for_the_installed_neovim_shows_the_findings(tmp_path) -> None:
    """Run by a real Neovim where one is installed (Debian 12's is 0.7.2)."""
    found = _neovim()
    if found is None:
        pytest.skip("Neovim is not installed")
    nvim, version = found
    blocks = [b for b, (low, high) in _neovim_blocks() if low <= version and (high is None or version <= high)]
    assert blocks, f"no README snippet for Neovim {version}"
    scripts = Path(sys.executable).parent
    if not (scripts / "fixitem").exists():
        pytest.skip("the fixitem script is not installed beside this Python")
    model = tmp_path / "model.py"
    model.write_text(MODEL)
    (tmp_path / "init.lua").write_text(blocks[-1])
    (tmp_path / "check.lua").write_text(NEOVIM_CHECK)
    env = {**os.environ, "PATH": f"{scripts}{os.pathsep}{os.environ.get('PATH', '')}", "HOME": str(tmp_path),
           "XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_DATA_HOME": str(tmp_path / "data"),
           "XDG_STATE_HOME": str(tmp_path / "state"), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    proc = subprocess.run([nvim, "--headless", "-u", "init.lua", "-c", "luafile check.lua", "model.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert "Error" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    expected = [f"{f.line}:{f.col}: " for f in api.scan([model], isolated=True, cache=False).findings]
    shown = (tmp_path / "diagnostics.txt").read_text().splitlines()
    assert [line.split(": ", 1)[0] + ": " for line in shown] == expected and expected
