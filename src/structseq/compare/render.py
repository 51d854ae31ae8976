"""The report of `structseq.compare.compare` as Markdown, LaTeX or JSON (`render`)."""

from __future__ import annotations

import json

from structseq.metrics.base import stated_scale
from structseq.metrics.significance import format_mean_and_sd

FORMATS = ("markdown", "latex", "json")
TEST_NAMES = {"bootstrap": "paired bootstrap", "ar": "approximate randomisation"}


def _digits(signature: str) -> int:
    return 2 if stated_scale(signature) == "percent" else 3


def _mean_sd(s: dict, d: int, pm: str) -> str:
    return format_mean_and_sd(s["mean"], s["sd"], d, pm)


def _ci(s: dict, d: int) -> str:
    ci = s.get("interval", s["ci"])  # reports before the bootstrap interval hold only the t interval
    return f"[{ci[0]:.{d}f}, {ci[1]:.{d}f}]" if ci else "-"


def _verdict(m: dict, report: dict) -> str:
    v = m.get("verdict")
    if v is None:
        return "-"
    if v == "=":
        return "no significant difference"
    return f"{report['systems'][v]['name']} better"


def _p(m: dict) -> str:
    return ", ".join(f"{t['p_value']:.4f}" for t in m["paired"]) if m["paired"] else "-"


def _seeds(system: dict) -> str:
    seeds = [o["seed"] for o in system["outputs"]]
    if all(s is not None for s in seeds):
        return f"seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}"
    return f"{len(seeds)} output{'s' if len(seeds) > 1 else ''}"


def _name(ident) -> str:
    return f"seed {ident}" if isinstance(ident, int) else str(ident)


def _settings(system: dict) -> str:
    from structseq.evaluation import describe as settings_line

    lines = {settings_line(o.get("settings")) for o in system["outputs"]}
    return lines.pop() if len(lines) == 1 else "mixed: " + "; ".join(sorted(lines))


def describe(report: dict) -> str:
    """One paragraph: what was compared and how (the test, the pairing of seeds, the interval)."""
    t, a, b = report["test"], report["systems"]["A"], report["systems"]["B"]
    if t["pairing"] == "pooled":
        how = (
            "once, on each example's statistics averaged over seeds (for BLEU, the output most seeds agree on)"
            if len(a["outputs"]) > 1 or len(b["outputs"]) > 1
            else "once"
        )
    elif t.get("pairs") is None and t.get("unpaired"):
        how = (
            "not on the examples: the two sides' seeds do not pair up (other seeds or another number of them), "
            f"so every run is tested, {t['unpaired']}"
        )
    else:
        how = "on each seed pair (" + ", ".join(f"A {_name(x)} vs B {_name(y)}" for x, y in t["pairs"]) + ")"
    paired = (
        f"Paired test: {TEST_NAMES[t['name']]} over examples, {t['resamples']} resamples, seed {t['seed']}, {how}; "
        f"BLEU through {t['bleu']}, tokenizer {t['bleu_tokenize']}. "
        if not t.get("unpaired")
        else f"Test: {how}; BLEU tokenizer {t['bleu_tokenize']}. "  # no paired test ran: none is named
    )
    return (
        f"A = {a['name']} ({_seeds(a)}); B = {b['name']} ({_seeds(b)}); split {report['split'] or '-'}, "
        f"{report['n_examples']} examples. "
        + paired
        + f"Intervals: {round(100 * t['level'])}% t interval of the mean over a side's seeds, cut to the metric's "
        "range; for a side of one output, sacrebleu's bootstrap interval (mean ± half-width of the 95% percentile "
        f"interval, {t['resamples']} resamples of the examples). "
        + (f"Verdict: {t['verdict']}. " if t.get("verdict") else "")
        + f"Settings: A {_settings(a)}; B {_settings(b)}."
    )


def _rows(report: dict, pm: str) -> list[list[str]]:
    rows = []
    for m in report["metrics"]:
        d = _digits(m["signature"])
        rows.append(
            [
                m["name"],
                _mean_sd(m["A"], d, pm),
                _ci(m["A"], d),
                _mean_sd(m["B"], d, pm),
                _ci(m["B"], d),
                f"{m['delta']:+.{d}f}",
                _p(m),
                _verdict(m, report),
            ]
        )
    return rows


def header(report: dict) -> list[str]:
    """The columns, each system under its own name (`--names`)."""
    level = round(100 * report["test"]["level"])
    a, b = report["systems"]["A"]["name"], report["systems"]["B"]["name"]
    return [
        "metric",
        f"{a} mean ± sd",
        f"{a} {level}% CI",
        f"{b} mean ± sd",
        f"{b} {level}% CI",
        f"{a} − {b}",
        f"p ({'Welch t over runs' if report['test'].get('unpaired') else TEST_NAMES[report['test']['name']]})",
        "verdict",
    ]


def markdown(report: dict) -> str:
    lines = [describe(report), "", "| " + " | ".join(header(report)) + " |", "|" + "---|" * len(header(report))]
    lines += ["| " + " | ".join(r) + " |" for r in _rows(report, "±")]
    lines += ["", "Signatures:", ""] + [f"- {m['name']}: `{m['signature']}`" for m in report["metrics"]]
    return "\n".join(lines) + "\n"


_TEX = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\^{}",
}


def _tex(text: str) -> str:
    """`text` with LaTeX's special characters escaped."""
    return "".join(_TEX.get(c, c) for c in text)


def latex(report: dict) -> str:
    """A booktabs `tabular` (one row per metric; `\\usepackage{booktabs}`) preceded by the description as a
    comment."""
    head = [_tex(h).replace("±", r"$\pm$").replace("−", "$-$") for h in header(report)]
    cols = "l" + "r" * (len(head) - 2) + "l"
    lines = [
        "% " + describe(report),
        rf"\begin{{tabular}}{{{cols}}}",
        r"\toprule",
        " & ".join(head) + r" \\",
        r"\midrule",
    ]
    for r in _rows(report, r"$\pm$"):
        lines.append(" & ".join([_tex(r[0]), *r[1:-1], _tex(r[-1])]) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


def render(report: dict, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(report, indent=1) + "\n"
    if fmt == "latex":
        return latex(report)
    if fmt == "markdown":
        return markdown(report)
    raise ValueError(f"unknown format {fmt!r}; choices: {', '.join(FORMATS)}")


def _tex_cell(text: str) -> str:
    """A Markdown table cell in LaTeX: escaped, `**x**` bold, `` `x` `` typewriter, ± and − as math."""
    import re

    parts = re.split(r"(\*\*[^*]+\*\*|`[^`]+`)", text.strip())
    out = []
    for p in parts:
        if p.startswith("**") and p.endswith("**") and len(p) > 4:
            out.append(rf"\textbf{{{_tex(p[2:-2])}}}")
        elif p.startswith("`") and p.endswith("`") and len(p) > 2:
            out.append(rf"\texttt{{{_tex(p[1:-1])}}}")
        else:
            out.append(_tex(p))
    return "".join(out).replace("±", r"$\pm$").replace("−", "$-$")


def markdown_latex(md: str) -> str:
    """Markdown's pipe tables as booktabs `tabular`s (columns aligned as the separator row says: `---:` right,
    `:---:` centre, else left), every other non-blank line kept as a LaTeX comment: the tables of `structseq
    report` in a paper, as `compare --format latex` gives compare's."""
    lines, out, i = md.splitlines(), [], 0

    def cells(line: str) -> list[str]:
        return [c for c in line.strip().strip("|").split("|")]

    while i < len(lines):
        line = lines[i]
        sep = lines[i + 1].strip() if i + 1 < len(lines) else ""
        if line.lstrip().startswith("|") and sep.startswith("|") and set(sep) <= set("|:- "):
            aligns = "".join(
                "c"
                if a.strip().startswith(":") and a.strip().endswith(":")
                else "r"
                if a.strip().endswith(":")
                else "l"
                for a in cells(sep)
            )
            out += [rf"\begin{{tabular}}{{{aligns}}}", r"\toprule", " & ".join(map(_tex_cell, cells(line))) + r" \\"]
            out.append(r"\midrule")
            i += 2
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                out.append(" & ".join(map(_tex_cell, cells(lines[i]))) + r" \\")
                i += 1
            out += [r"\bottomrule", r"\end{tabular}"]
            continue
        if line.strip():
            out.append("% " + line)
        i += 1
    return "\n".join(out) + "\n"
