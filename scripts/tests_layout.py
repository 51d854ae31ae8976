"""The tests' layout (issue 56 item 2): `tests/` mirrors `src/structseq/` by subject.

    python scripts/tests_layout.py --check      # list the test files not in place; exit 1 if any
    python scripts/tests_layout.py --dry-run    # print the moves, change nothing
    python scripts/tests_layout.py              # git mv each flat test file to its place (pure renames)
    python scripts/tests_layout.py --fix-refs   # rewrite what names a moved file (imports, paths in docs, tables)

The rule (also in tests/README.md; tests/repo/test_layout.py checks it):

- a test of `structseq/PKG/...` lies in `tests/PKG/` (deeper folders only where they mirror a package below PKG);
- a test of a top-level module `structseq/MOD.py` is `tests/test_MOD.py` or `tests/test_MOD_TOPIC.py`;
- whole-CLI workflows (several commands, several packages) lie in `tests/cli/`;
- checks of the repository rather than of a module (the layers and import rules, file sizes, README and docs,
  scripts/, benchmarks/, the mutants' tables) lie in `tests/repo/`;
- helpers and recorded data that several tests share lie in `tests/fixtures/` (no tests there).

Every folder under tests/ is a package (an `__init__.py`), so two files of the same name in two folders are two
modules (`tests.decode.test_search`, `tests.compose.test_search`) under pytest's default import mode, and a test
imports shared helpers as `tests.fixtures.X` or `tests.fixtures.cli_run`.

A flat file (`tests/test_NAME.py`) goes where MOVES says; one not listed there follows the rule of its name:
`test_PKG_REST.py` goes to `tests/PKG/test_REST.py` when PKG is a package of structseq, `test_MOD*.py` stays when
MOD is a top-level module; any other is listed by --check as having no place (add it to MOVES). Running it again
after others add flat files moves only those (idempotent). `--fix-refs` rewrites `tests/test_NAME.py` (and its
`::test` ids) and `tests.test_NAME` imports in the tracked text files (not in results/: those are records) that
name a flat file moved (by MOVES or by the rule of its name).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
SRC = ROOT / "src" / "structseq"
EXTRA = {"cli": "whole-CLI workflows", "repo": "checks of the repository", "fixtures": "shared helpers and data"}

# flat file -> its place under tests/, by subject (what the file's tests exercise)
MOVES = {
    "test_architecture.py": "repo/test_architecture.py",
    "test_attention_backends.py": "nn/test_attention_backends.py",
    "test_batching_host.py": "data/test_batching_host.py",
    "test_beam_generate.py": "decode/test_beam_generate.py",
    "test_beam_oracle.py": "decode/test_beam_oracle.py",
    "test_behaviour_averaging.py": "run/test_averaging.py",
    "test_behaviour_compare.py": "compare/test_inputs.py",
    "test_behaviour_ensemble.py": "decode/test_ensemble.py",
    "test_behaviour_export.py": "test_export.py",
    "test_behaviour_fields.py": "test_fields.py",
    "test_behaviour_hf_checkpoint.py": "models/test_hf_checkpoint.py",
    "test_behaviour_hf_seq2seq_model.py": "models/test_hf_seq2seq.py",
    "test_behaviour_limits.py": "data/test_limits.py",
    "test_behaviour_loggers.py": "train/test_loggers.py",
    "test_behaviour_mutants_script.py": "repo/test_mutants_script.py",
    "test_behaviour_outputs.py": "test_outputs.py",
    "test_behaviour_registry.py": "test_registry.py",
    "test_behaviour_resume.py": "run/test_resume.py",
    "test_behaviour_rundir.py": "run/test_rundir.py",
    "test_behaviour_sampling.py": "decode/test_sampling.py",
    "test_behaviour_significance.py": "metrics/test_significance.py",
    "test_behaviour_small_parsers.py": "cli/test_small_parsers.py",
    "test_behaviour_subword.py": "data/test_subword.py",
    "test_bench_pretrained.py": "repo/test_bench_pretrained.py",
    "test_benchmarks.py": "repo/test_benchmarks.py",
    "test_blowup_warning.py": "metrics/test_blowup.py",
    "test_buckets.py": "data/test_buckets.py",
    "test_chrf.py": "metrics/test_chrf.py",
    "test_cli_config.py": "cli/test_config.py",
    "test_client_seams.py": "repo/test_client_seams.py",
    "test_cognition_eval.py": "test_evaluation_cognition.py",
    "test_colors.py": "data/test_colors.py",
    "test_compare.py": "compare/test_compare.py",
    "test_compare_reading.py": "compare/test_reading.py",
    "test_compare_unpaired.py": "compare/test_unpaired.py",
    "test_compiled.py": "train/test_compiled.py",
    "test_compose_cli.py": "compose/test_cli.py",
    "test_compose_degree.py": "compose/test_degree.py",
    "test_compose_lifecycle.py": "compose/test_lifecycle.py",
    "test_compose_ray.py": "compose/test_engine_ray.py",
    "test_compose_realdata.py": "compose/test_realdata.py",
    "test_compose_runs.py": "compose/test_runs.py",
    "test_compose_select.py": "compose/test_select.py",
    "test_compose_sharded.py": "compose/test_sharded.py",
    "test_compose_stats.py": "compose/test_stats.py",
    "test_compose_summary.py": "compose/test_summary.py",
    "test_compose_uncertainty.py": "compose/test_uncertainty.py",
    "test_config.py": "config/test_config.py",
    "test_context_models.py": "models/test_context.py",
    "test_context_task.py": "tasks/test_context.py",
    "test_core_fixture.py": "models/test_core_fixture.py",
    "test_cter.py": "metrics/test_cter.py",
    "test_daily_loop.py": "cli/test_daily_loop.py",
    "test_dangle.py": "models/test_dangle.py",
    "test_data.py": "data/test_data.py",
    "test_decode_hf_scores.py": "decode/test_hf_scores.py",
    "test_decode_identity.py": "decode/test_identity.py",
    "test_decode_settings.py": "decode/test_settings.py",
    "test_decode_strategies.py": "decode/test_strategies.py",
    "test_demo.py": "test_demo.py",
    "test_dropout.py": "nn/test_dropout.py",
    "test_evaluation_files.py": "test_evaluation_files.py",
    "test_evaluation_names.py": "test_evaluation_names.py",
    "test_experiments_cli.py": "experiments/test_cli.py",
    "test_export_transformers.py": "test_export_marian.py",
    "test_extending_doc.py": "repo/test_extending_doc.py",
    "test_file_size.py": "repo/test_file_size.py",
    "test_fuzz.py": "test_errors_fuzz.py",
    "test_generic_code.py": "repo/test_generic_code.py",
    "test_gpu.py": "train/test_gpu.py",
    "test_gpu_paths.py": "train/test_gpu_paths.py",
    "test_gpu_smoke.py": "repo/test_gpu_smoke.py",
    "test_grammar.py": "decode/test_grammar.py",
    "test_grammar_decode.py": "decode/test_grammar_decode.py",
    "test_hf_conventions.py": "tasks/test_hf_conventions.py",
    "test_hf_seq2seq.py": "tasks/test_hf_seq2seq.py",
    "test_lease_plan.py": "repo/test_lease_plan.py",
    "test_lexical_head.py": "models/test_lexical.py",
    "test_lexicon.py": "lexicon/test_lexicon.py",
    "test_lexicon_bayesian.py": "lexicon/test_bayesian.py",
    "test_lexicon_cli.py": "cli/test_lexicon.py",
    "test_lexicon_ibm.py": "lexicon/test_ibm.py",
    "test_lstm_fast.py": "models/test_lstm.py",
    "test_many.py": "train/test_many.py",
    "test_metric_option.py": "metrics/test_metric_option.py",
    "test_metric_registry.py": "metrics/test_registry.py",
    "test_metrics.py": "metrics/test_metrics.py",
    "test_models.py": "models/test_models.py",
    "test_mutants_changed.py": "repo/test_mutants_changed.py",
    "test_nbest_ids.py": "decode/test_nbest_ids.py",
    "test_old_runs.py": "train/test_old_runs.py",
    "test_one_owner.py": "repo/test_one_owner.py",
    "test_pretrained_recipe.py": "repo/test_pretrained_recipe.py",
    "test_processors.py": "decode/test_processors.py",
    "test_processors_generate.py": "decode/test_processors_generate.py",
    "test_rdangle_pretrained.py": "models/test_rdangle_pretrained.py",
    "test_readme.py": "repo/test_readme.py",
    "test_reliability_bounds.py": "data/test_bounds.py",
    "test_reliability_checkpoint.py": "run/test_checkpoint.py",
    "test_reliability_data.py": "data/test_silently_wrong.py",
    "test_reliability_exports.py": "test_export_stranger.py",
    "test_reliability_inputs.py": "data/test_inputs.py",
    "test_reliability_long_inputs.py": "lexicon/test_long_inputs.py",
    "test_reliability_machine.py": "cli/test_machine_errors.py",
    "test_reliability_mutants.py": "repo/test_mutants.py",
    "test_reliability_outputs.py": "test_outputs_atomic.py",
    "test_reliability_pretrained.py": "models/test_pretrained_mistakes.py",
    "test_reliability_rundir.py": "run/test_rundir_lock.py",
    "test_reliability_runs.py": "train/test_runs.py",
    "test_reliability_silent.py": "data/test_silent_inputs.py",
    "test_reliability_stranger.py": "models/test_stranger_files.py",
    "test_reliability_strong.py": "decode/test_exact_expectations.py",
    "test_reliability_values.py": "test_yamlio.py",
    "test_report.py": "report/test_report.py",
    "test_report_confined.py": "report/test_confine.py",
    "test_run_globs.py": "cli/test_run_globs.py",
    "test_scan.py": "data/test_scan.py",
    "test_schema_bounds.py": "config/test_schema_bounds.py",
    "test_scripts.py": "repo/test_scripts.py",
    "test_sampling_generate.py": "decode/test_sampling_generate.py",
    "test_search.py": "decode/test_search.py",
    "test_settings_line.py": "test_evaluation_settings_line.py",
    "test_small_choices.py": "cli/test_small_choices.py",
    "test_subword_jsonl.py": "data/test_subword_jsonl.py",
    "test_supertag.py": "tasks/test_supertag.py",
    "test_supertag_formats.py": "tasks/test_supertag_formats.py",
    "test_supertag_reference.py": "models/test_supertagger_reference.py",
    "test_supertag_reliability.py": "tasks/test_supertag_inputs.py",
    "test_tagging_strategies.py": "decode/test_tagging_strategies.py",
    "test_tasks.py": "tasks/test_tasks.py",
    "test_testing_process.py": "testing/test_process.py",
    "test_threads.py": "train/test_threads.py",
    "test_train.py": "train/test_train.py",
    "test_training_step.py": "train/test_training_step.py",
    "test_workflow_search.py": "cli/test_workflow_search.py",
    "test_workflow_training.py": "cli/test_workflow_training.py",
}


def packages() -> set[str]:
    """The folders under src/structseq that are packages, as paths relative to it ('decode', 'decode/processors')."""
    return {p.parent.relative_to(SRC).as_posix() for p in SRC.rglob("__init__.py") if p.parent != SRC}


def top_modules() -> set[str]:
    return {p.stem for p in SRC.glob("*.py") if not p.stem.startswith("__")}


def misplaced(rel: str) -> str | None:
    """Why the test file tests/REL is not in place, or None when it is."""
    parts = rel.split("/")
    if len(parts) == 1:
        stem = parts[0].removesuffix(".py").removeprefix("test_")
        if any(stem == m or stem.startswith(m + "_") for m in top_modules()):
            return None
        return "flat: not a test of a top-level module (test_MODULE[_TOPIC].py)"
    folder = "/".join(parts[:-1])
    if parts[0] == "fixtures":
        return "tests/fixtures holds helpers and data, not tests"
    if folder in packages() or (len(parts) == 2 and parts[0] in EXTRA):
        return None
    return f"tests/{folder} mirrors no package of src/structseq (nor is one of {', '.join(sorted(EXTRA))})"


def destination(name: str) -> str | None:
    """Where the flat file tests/NAME goes: MOVES, else the rule of its name; None when it has no place."""
    if name in MOVES:
        return MOVES[name]
    stem = name.removesuffix(".py").removeprefix("test_")
    for pkg in sorted((p for p in packages() if "/" not in p), key=len, reverse=True):
        if stem.startswith(pkg + "_"):
            return f"{pkg}/test_{stem[len(pkg) + 1 :]}.py"
    return name if misplaced(name) is None else None


def test_files() -> list[str]:
    return sorted(p.relative_to(TESTS).as_posix() for p in TESTS.rglob("test_*.py"))


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout


def check() -> int:
    bad = [(rel, why) for rel in test_files() if (why := misplaced(rel))]
    for rel, why in bad:
        dest = destination(rel) if "/" not in rel else None
        print(f"tests/{rel}: {why}" + (f" -> tests/{dest}" if dest and dest != rel else ""))
    missing = sorted(
        f.relative_to(TESTS).as_posix()
        for f in TESTS.rglob("*")
        if f.is_dir() and "__pycache__" not in f.parts and any(f.rglob("*.py")) and not (f / "__init__.py").is_file()
    )
    for rel in missing:
        print(f"tests/{rel}: no __init__.py (every folder of tests/ is a package)")
    return 1 if bad or missing or not (TESTS / "__init__.py").is_file() else 0


def move(dry_run: bool) -> int:
    status = 0
    for rel in test_files():
        if "/" in rel:
            continue
        dest = destination(rel)
        if dest is None:
            print(f"tests/{rel}: no place (add it to MOVES in {Path(__file__).name})", file=sys.stderr)
            status = 1
            continue
        if dest == rel:
            continue
        target = TESTS / dest
        if target.exists():
            print(f"tests/{rel}: tests/{dest} exists already (merge by hand)", file=sys.stderr)
            status = 1
            continue
        print(f"git mv tests/{rel} tests/{dest}")
        if dry_run:
            continue
        for folder in [p for p in reversed(target.relative_to(TESTS).parents) if p != Path(".")]:
            init = TESTS / folder / "__init__.py"
            if not init.exists():
                init.parent.mkdir(parents=True, exist_ok=True)
                init.write_text("")
                git("add", init.relative_to(ROOT).as_posix())
        git("mv", f"tests/{rel}", f"tests/{dest}")
    return status


PATH_REF = re.compile(r"(?<![\w.])tests/(test_\w+)\.py(?![\w])")
MODULE_REF = re.compile(r"(?<![\w.])tests\.(test_\w+)(?![\w])")


def moved_to(name: str) -> str | None:
    """Where the flat file tests/NAME went (MOVES or the rule of its name), when it is there and NAME is not."""
    if (TESTS / name).exists():
        return None
    dest = destination(name)
    return dest if dest and dest != name and (TESTS / dest).is_file() else None


def rewrite(text: str) -> str:
    """`text` with each `tests/test_x.py` (and its ::ids) and `tests.test_x` of a moved file naming its place."""

    def path(m: re.Match) -> str:
        dest = moved_to(m.group(1) + ".py")
        return f"tests/{dest}" if dest else m.group(0)

    def module(m: re.Match) -> str:
        dest = moved_to(m.group(1) + ".py")
        return "tests." + dest.removesuffix(".py").replace("/", ".") if dest else m.group(0)

    return MODULE_REF.sub(module, PATH_REF.sub(path, text))


def fix_refs(dry_run: bool) -> int:
    for rel in git("ls-files", "-z").split("\0"):
        path = ROOT / rel
        if not rel or rel.startswith("results/") or not path.is_file() or path.suffix in {".pt", ".json", ".png"}:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        new = rewrite(text)
        if new != text:
            print(f"references rewritten: {rel}")
            if not dry_run:
                path.write_text(new, encoding="utf-8")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--check", action="store_true", help="list the test files not in place; exit 1 if any")
    p.add_argument("--dry-run", action="store_true", help="print what would change, change nothing")
    p.add_argument("--fix-refs", action="store_true", help="rewrite the references to moved files")
    args = p.parse_args(argv)
    if args.check:
        return check()
    if args.fix_refs:
        return fix_refs(args.dry_run)
    return move(args.dry_run)


if __name__ == "__main__":
    sys.exit(main())
