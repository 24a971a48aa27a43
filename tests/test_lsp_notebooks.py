"""The language server on notebook documents (LSP 3.17 notebook sync), driven as VS Code drives it.

Each cell is its own text document (``vscode-notebook-cell:...``); the server
reads the code cells as one module in cell order, as ``fixitem scan x.ipynb``
does, and publishes diagnostics and code actions per cell document.
"""

from __future__ import annotations

import json
from pathlib import Path

import test_lsp
from test_lsp import TIMEOUT, Client, InProcess, apply_edit, lsp_process

from fixitem import api
from fixitem.lsp import FIX_ALL

NOTEBOOK_TYPE = "jupyter-notebook"
# The fixtures of the text-document tests: a project folder, a server running in this process.
project = test_lsp.project
session = test_lsp.session

CAPABILITIES = {"workspace": {"configuration": True}, "notebookDocument": {"synchronization": {}}}

# Analysed, never run: a device tensor (one made without ``device=`` is a CPU tensor, whose reads sync nothing).
IMPORTS = "import torch\n\nx = torch.ones(3, device='cuda')"
# If this line were read as Python, its `.item()` would be reported.
MAGIC = "%time print(x.sum().item())"
GATE = "y = x + 1\nif x.sum().item() > 0:\n    x = x * 2\nprint('done')\n"


def cell_uri(notebook: Path, index: int) -> str:
    """A cell's URI as VS Code makes them (the fragment names the cell, percent-encoded)."""
    return f"vscode-notebook-cell:{notebook.as_posix()}#W{index}sZmlsZQ%3D%3D"


def open_notebook(client: Client, notebook: Path, cells: list[tuple[str, str]], version: int = 1) -> list[str]:
    """notebookDocument/didOpen with ``cells`` ((kind, text): "code" or "markdown"); the cells' URIs."""
    uris = [cell_uri(notebook, index) for index in range(len(cells))]
    client.notify("notebookDocument/didOpen", {
        "notebookDocument": {
            "uri": notebook.as_uri(), "notebookType": NOTEBOOK_TYPE, "version": version,
            "cells": [{"kind": 2 if kind == "code" else 1, "document": uri} for uri, (kind, _) in zip(uris, cells)],
        },
        "cellTextDocuments": [
            {"uri": uri, "languageId": "python" if kind == "code" else "markdown", "version": 1, "text": text}
            for uri, (kind, text) in zip(uris, cells)
        ],
    })
    return uris


def published(client: Client, uris: list[str]) -> dict[str, dict]:
    """The next publishDiagnostics of each of ``uris`` (one publication each)."""
    got: dict[str, dict] = {}
    while len(got) < len(uris):
        message = client.notifications.get(timeout=TIMEOUT)
        if message["method"] == "textDocument/publishDiagnostics" and message["params"]["uri"] in uris:
            assert message["params"]["uri"] not in got, "published twice"
            got[message["params"]["uri"]] = message["params"]
    return got


def applied_to_notebook(tmp: Path, cells: list[tuple[str, str]]) -> list[str]:
    """Each cell's text after ``fixitem.apply`` on a notebook of ``cells``."""
    folder = tmp / "by-apply"
    folder.mkdir(exist_ok=True)
    (folder / ".git").mkdir(exist_ok=True)  # no configuration from above
    target = folder / "nb.ipynb"
    items = [
        {"cell_type": kind, "id": f"c{i}", "metadata": {}, "source": text.splitlines(keepends=True),
         **({"execution_count": None, "outputs": []} if kind == "code" else {})}
        for i, (kind, text) in enumerate(cells)
    ]
    data = {"cells": items, "metadata": {"language_info": {"name": "python"}}, "nbformat": 4, "nbformat_minor": 5}
    target.write_text(json.dumps(data, indent=1), encoding="utf-8")
    result = api.apply([target], cache=False)
    assert not result.errors
    return ["".join(cell["source"]) for cell in json.loads(target.read_text(encoding="utf-8"))["cells"]]


def test_notebook_session_over_stdio(project: Path, tmp_path: Path) -> None:
    notebook = project / "train.ipynb"
    cells = [("code", IMPORTS), ("code", MAGIC), ("code", GATE)]
    with lsp_process(project) as client:
        init = client.initialize(project, capabilities=CAPABILITIES)
        assert init["capabilities"]["notebookDocumentSync"] == {
            "notebookSelector": [{"notebook": {"notebookType": NOTEBOOK_TYPE}, "cells": [{"language": "python"}]}],
            "save": True,
        }
        uris = open_notebook(client, notebook, cells)
        got = published(client, uris)
        assert got[uris[0]]["diagnostics"] == []
        assert got[uris[1]]["diagnostics"] == []  # the magic is kept, never parsed
        [diag] = got[uris[2]]["diagnostics"]
        assert got[uris[2]]["version"] == 1
        # `x` is a tensor because cell 1 bound it: the finding has a safe fix.
        assert diag["code"] == "FX101" and "[fix: safe]" in diag["message"]
        line = GATE.splitlines().index("if x.sum().item() > 0:")
        assert diag["range"]["start"] == {"line": line, "character": 0}
        assert diag["data"]["line"] == line + 1

        actions = client.code_actions(uris[2], diag["range"])
        [fix] = [a for a in actions if a["kind"] == "quickfix"]
        assert fix["title"] == "fixitem: fix FX101 (where-if)"
        assert set(fix["edit"]["changes"]) == {uris[2]}  # the edit targets the cell's document
        [edit] = fix["edit"]["changes"][uris[2]]
        # Minimal: the unchanged first and last lines of the cell are not part of the edit.
        assert edit["range"]["start"]["line"] == line and edit["range"]["end"]["line"] < GATE.count("\n") - 1
        expected = applied_to_notebook(tmp_path, cells)
        assert apply_edit(GATE, fix["edit"], uris[2]) == expected[2] != GATE
        assert expected[:2] == [IMPORTS, MAGIC]

        client.notify("notebookDocument/didClose", {
            "notebookDocument": {"uri": notebook.as_uri()}, "cellTextDocuments": [{"uri": uri} for uri in uris],
        })
        cleared = published(client, uris)
        assert all(cleared[uri]["diagnostics"] == [] for uri in uris)
        assert not notebook.exists()  # the server never writes


def test_a_fix_that_needs_an_import_edits_the_cell_with_the_imports(project: Path, session: InProcess,
                                                                  tmp_path: Path) -> None:
    cells = [("code", "import torch\n\nmodel = torch.nn.Linear(3, 1)"), ("markdown", "# Train"),
             ("code", "for step in range(2):\n    loss = model(torch.ones(3)).sum()\n    print(loss.item())\n")]
    client = session.client
    client.initialize(project, capabilities={**CAPABILITIES, "workspace": {"workspaceEdit": {"documentChanges": True}}})
    uris = open_notebook(client, project / "loop.ipynb", cells)
    got = published(client, uris)
    assert got[uris[1]] == {"uri": uris[1], "diagnostics": []}  # markdown: cleared, never analysed
    [diag] = got[uris[2]]["diagnostics"]
    [fix] = [a for a in client.code_actions(uris[2], diag["range"]) if a["kind"] == "quickfix"]
    changes = fix["edit"]["documentChanges"]
    assert [c["textDocument"] for c in changes] == [{"uri": uris[0], "version": 1}, {"uri": uris[2], "version": 1}]
    expected = applied_to_notebook(tmp_path, cells)
    for index in (0, 2):
        assert apply_edit(cells[index][1], fix["edit"], uris[index]) == expected[index] != cells[index][1]
    # "Ignore on this line" goes into the cell alone.
    [ignore] = [a for a in client.code_actions(uris[2], diag["range"], ignores=True) if "ignore" in a["title"]]
    [change] = ignore["edit"]["documentChanges"]
    assert change["textDocument"]["uri"] == uris[2]
    assert apply_edit(cells[2][1], ignore["edit"], uris[2]).endswith("print(loss.item())  # fixitem: ignore[FX201]\n")


def test_cells_added_changed_and_removed(project: Path, tmp_path: Path) -> None:
    running = InProcess(debounce_s=0.05)
    client = running.client
    try:
        client.initialize(project, capabilities=CAPABILITIES)
        notebook = project / "grow.ipynb"
        uris = open_notebook(client, notebook, [("code", "import torch\nt = torch.ones(3, device='cuda')"), ("markdown", "text")])
        assert all(p["diagnostics"] == [] for p in published(client, uris).values())

        # A cell added at the end: its `t` is the tensor of cell 1.
        new = cell_uri(notebook, 2)
        client.notify("notebookDocument/didChange", {
            "notebookDocument": {"uri": notebook.as_uri(), "version": 2},
            "change": {"cells": {"structure": {
                "array": {"start": 2, "deleteCount": 0, "cells": [{"kind": 2, "document": new}]},
                "didOpen": [{"uri": new, "languageId": "python", "version": 1,
                             "text": "if t.sum().item() > 0:\n    t = t * 2\n"}],
            }}},
        })
        [diag] = published(client, [*uris, new])[new]["diagnostics"]
        assert diag["code"] == "FX101" and diag["data"]["fix"] == "safe"

        # Cell 1's text changed: `t` is no longer known to be a tensor, so cell 3's finding has no fix.
        client.notify("notebookDocument/didChange", {
            "notebookDocument": {"uri": notebook.as_uri(), "version": 3},
            "change": {"cells": {"textContent": [{
                "document": {"uri": uris[0], "version": 2},
                "changes": [{"range": {"start": {"line": 1, "character": 4}, "end": {"line": 1, "character": 17}},
                             "text": "load()"}],
            }]}},
        })
        after = published(client, [*uris, new])
        assert after[new]["diagnostics"][0]["data"]["fix"] == "none"
        assert after[uris[0]]["version"] == 2

        # Saving analyses again; the same texts are not run through the engine again.
        runs = running.server.analyser.runs
        client.notify("notebookDocument/didSave", {"notebookDocument": {"uri": notebook.as_uri()}})
        assert published(client, [*uris, new])[new]["diagnostics"][0]["data"]["fix"] == "none"
        assert running.server.analyser.runs == runs

        # The cell removed: its diagnostics are cleared.
        client.notify("notebookDocument/didChange", {
            "notebookDocument": {"uri": notebook.as_uri(), "version": 4},
            "change": {"cells": {"structure": {"array": {"start": 2, "deleteCount": 1}, "didClose": [{"uri": new}]}}},
        })
        removed = client.diagnostics(new)
        assert removed["diagnostics"] == []
        assert running.server.notebook_of(new) is None
        again = published(client, uris)  # the remaining cells, analysed again
        assert all(p["diagnostics"] == [] for p in again.values())
    finally:
        running.stop()


def test_configuration_changes_analyse_notebooks_as_notebooks(project: Path, session: InProcess) -> None:
    client = session.client
    client.initialize(project, capabilities=CAPABILITIES)
    uris = open_notebook(client, project / "nb.ipynb", [("code", IMPORTS), ("code", GATE)])
    first = published(client, uris)
    client.notify("workspace/didChangeConfiguration", {"settings": {"fixitem": {"unsafe": True}}})
    # Each cell again, and cell 2 still with its notebook's context (alone, `x` would be unknown).
    again = published(client, uris)
    assert again[uris[1]]["diagnostics"] == first[uris[1]]["diagnostics"]
    assert again[uris[1]]["diagnostics"][0]["data"]["fix"] == "safe"


def test_cell_actions_resolved_when_the_client_asks(project: Path, session: InProcess, tmp_path: Path) -> None:
    cells = [("code", IMPORTS), ("code", MAGIC), ("code", GATE)]
    client = session.client
    client.initialize(project, capabilities={
        **CAPABILITIES, "textDocument": {"codeAction": {"resolveSupport": {"properties": ["edit"]}}},
    })
    uris = open_notebook(client, project / "nb.ipynb", cells)
    [diag] = published(client, uris)[uris[2]]["diagnostics"]
    runs = session.server.analyser.runs
    actions = client.code_actions(uris[2], diag["range"])
    assert [a["kind"] for a in actions] == ["quickfix", FIX_ALL] and all("edit" not in a for a in actions)
    assert session.server.analyser.runs == runs
    expected = applied_to_notebook(tmp_path, cells)
    for action in actions:
        edit = client.request("codeAction/resolve", action)["edit"]
        assert list(edit["changes"]) == [uris[2]]
        assert apply_edit(GATE, edit, uris[2]) == expected[2]
    # The magic cell has no findings, hence no actions.
    everywhere = {"start": {"line": 0, "character": 0}, "end": {"line": 1, "character": 0}}
    assert client.code_actions(uris[1], everywhere, ignores=True) == []
