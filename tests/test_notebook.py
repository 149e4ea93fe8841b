"""A real notebook against the built wheel: a user's first ``check()`` (issue #30).

The notebook defines, at its top level, a correct FAVOR+ feature map, a broken one (features
scaled by 1/m instead of 1/√m: the kernel estimate is biased by a factor 1/m) and an attention
target with every causal form (the README's worked example, pasted into a cell), calls
``check`` on the three, and re-runs the broken map's failing case from the reproduce line
exactly as printed. It is executed with nbclient by a kernel in the wheel's virtualenv (the one
tests/test_packaging.py builds, with ipykernel linked in), from a directory holding nothing of
the checkout.

Asserted: the verdicts (the correct map and the forms pass, the broken map fails by its
unbiasedness assertion), the reproduce line (Python naming the notebook's variable) gives the
same failure, and the check cell prints one line before the table (the progress line; the issue
counted 188 output chunks of pytest's dots, tracebacks and warnings there), and its HTML has
every line of the failure's evidence.

Cost: the virtualenv is shared with tests/test_packaging.py (built once per run); the kernel
starts in ~3 s and the check of 4 properties on 3 targets runs in process (~15 s on one core).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from tests.test_packaging import REPO, _clean_env, shared_installed

nbformat = pytest.importorskip("nbformat", reason="the notebook extra (nbformat) is not installed")
nbclient = pytest.importorskip("nbclient", reason="the notebook extra (nbclient) is not installed")

KEYWORD = ("test_unbiased_on_grid or test_forms_agree_with_each_other or test_split_invariance "
           "or test_partition_of_unity")

MAPS = '''
import numpy as np
from kernel_verify import AttentionTarget, FeatureMapTarget, check


def draw(rng, d, m, config):
    return {"W": rng.standard_normal((m, d))}

def favor(x, p, config):  # φ(x) = exp(Wx − ‖x‖²/2) / √m
    return np.exp(x @ p["W"].T - 0.5 * np.sum(x * x, axis=-1, keepdims=True)) / np.sqrt(len(p["W"]))

def favor_over_m(x, p, config):  # the defect: 1/m where 1/√m is due
    return favor(x, p, config) / np.sqrt(len(p["W"]))

claims = frozenset({"unbiased", "positive"})
good = FeatureMapTarget("nb_favor", "softmax", claims, formula="softmax_positive", draw=draw,
                        numpy_fn=favor)
broken = FeatureMapTarget("nb_favor_over_m", "softmax", claims, formula="softmax_positive",
                          draw=draw, numpy_fn=favor_over_m)
'''

CHECK = f'''result = check([good, broken, elu_linear], profile="ci", keyword={KEYWORD!r})
result'''

REPORT = '''import json
rerun = get_ipython().run_cell(result.reproduce[0]).result  # the reproduce line, as printed
print(json.dumps({"verdicts": [[v.prop, v.target, v.outcome] for v in result.verdicts],
                  "repro": result.reproduce, "spec": result.spec,
                  "rerun": [[v.prop, v.target, v.outcome] for v in rerun.verdicts]}))'''


def _forms_cell() -> str:
    """The README's forms example (examples/linear_forms.py), its target named at top level."""
    body = (REPO / "examples" / "linear_forms.py").read_text(encoding="utf-8")
    return body.split('"""', 2)[2].strip() + "\n[elu_linear] = targets"


def _lines_before_table(outputs: list[dict]) -> tuple[int, str]:
    """Lines the cell printed (streams) before its result, as a notebook shows them: a
    carriage return rewrites its line."""
    text = "".join(o["text"] for o in outputs if o["output_type"] == "stream")
    shown = [line.rsplit("\r", 1)[-1] for line in text.split("\n")]
    shown = [line for line in shown if line.strip()]
    return len(shown), text


def execute(venv: Path, tmp_path: Path, *, allow_errors: bool = False):
    """The notebook (four cells: maps, forms, check, report) executed by a kernel of ``venv``
    in an empty directory under ``tmp_path``; returns the executed notebook."""
    kernels = tmp_path / "jupyter" / "kernels" / "kv-wheel"
    kernels.mkdir(parents=True)
    (kernels / "kernel.json").write_text(json.dumps({
        "argv": [str(venv / "bin" / "python"), "-m", "ipykernel_launcher", "-f",
                 "{connection_file}"],
        "display_name": "kernel-verify wheel", "language": "python"}))
    work = tmp_path / "work"
    work.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(MAPS), nbformat.v4.new_code_cell(_forms_cell()),
                nbformat.v4.new_code_cell(CHECK), nbformat.v4.new_code_cell(REPORT)]
    nbformat.write(nb, work / "first_hour.ipynb")
    env = {**_clean_env(), "JUPYTER_PATH": str(tmp_path / "jupyter"),
           "JUPYTER_DATA_DIR": str(tmp_path / "jupyter"), "OMP_NUM_THREADS": "1",
           "JUPYTER_PLATFORM_DIRS": "1"}
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        client = nbclient.NotebookClient(nb, kernel_name="kv-wheel", timeout=600,
                                         allow_errors=allow_errors,
                                         resources={"metadata": {"path": str(work)}})
        client.execute()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    nbformat.write(nb, work / "first_hour.ipynb")
    return nb


def test_a_notebook_checks_targets_defined_at_its_top_level(tmp_path_factory, tmp_path):
    nb = execute(shared_installed(tmp_path_factory), tmp_path)
    check_cell, report_cell = nb.cells[2], nb.cells[3]
    n_lines, text = _lines_before_table(check_cell.outputs)
    assert n_lines == 1 and text.startswith("\rkernel-verify check: 3 target(s) given in Python"), (
        text)
    [shown] = [o for o in check_cell.outputs if o["output_type"] == "execute_result"]
    page, plain = shown["data"]["text/html"], shown["data"]["text/plain"]
    assert plain.startswith("attention_forms::") and "1 failed" in plain, plain[:2000]
    assert "\x1b[" not in page + plain  # no terminal colours in the evidence
    data = json.loads(next(o["text"] for o in report_cell.outputs
                           if o["output_type"] == "stream" and o["text"].startswith("{")))
    verdicts = {(prop, target): word for prop, target, word in data["verdicts"]}
    assert data["spec"] == "<targets given in Python>"
    assert verdicts[("test_unbiased_on_grid", "nb_favor")] == "pass", verdicts
    assert verdicts[("test_unbiased_on_grid", "nb_favor_over_m")] == "fail", verdicts
    for prop in ("test_forms_agree_with_each_other", "test_split_invariance",
                 "test_partition_of_unity"):
        assert verdicts[(prop, "elu_linear")] == "pass", verdicts
    assert [w for w in verdicts.values() if w not in ("pass", "skip")] == ["fail"], verdicts
    # the reproduce line names the notebook's variable and re-runs the same failure
    [repro] = data["repro"]
    assert re.match(r"import kernel_verify; kernel_verify\.check\(broken, profile='ci', "
                    r"keyword='test_feature_unbiased and test_unbiased_on_grid\[", repro), repro
    assert data["rerun"] == [["test_unbiased_on_grid", "nb_favor_over_m", "fail"]], data
    # the HTML shows the evidence whole: every line of the table's evidence for that failure
    evidence = re.search(r"nb_favor_over_m</td><td style='color:#c33'><b>fail</b></td>"
                         r"<td style='text-align:left'><pre[^>]*>(.*?)</pre>", page, re.S)
    assert evidence and evidence.group(1).count("\n") >= 2, page[:3000]
