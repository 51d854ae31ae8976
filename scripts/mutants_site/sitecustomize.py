"""Put on PYTHONPATH by scripts/mutants_changed.py for mutmut's runs only: a Python process that a test starts
(`python -m structseq ...`, `python scripts/...`) while mutmut records which tests call which function
(MUTANT_UNDER_TEST=stats) runs the original functions without recording: mutmut could not keep its hits anyway
(they belong to another process), and its recorder looks for mutmut's configuration in the process's working
folder, which a test's temporary folder lacks (every such test failed the stats run). While a mutant is under
test the variable names it and is left alone, so a test's subprocess runs the mutant."""

import os

if os.environ.get("MUTANT_UNDER_TEST") == "stats":
    os.environ["MUTANT_UNDER_TEST"] = ""
