"""Our CoGnition CTER against the CoGnition paper's human judgements (RESULTS.md): precision, recall and agreement
per subset (positive class: "compound translated wrongly"), the reference tool's published figures, and both error
rates on the judged outputs.

    python scripts/cter_table.py [--data-root DIR]
"""

from __future__ import annotations

import argparse


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-root", help="default: $STRUCTSEQ_DATA, else ../shared/data")
    a = p.parse_args(argv)
    from structseq.metrics import validate_against_human

    v = validate_against_human(a.data_root)
    print("| subset | precision | recall | agreement |")
    print("|---|---|---|---|")
    for name, m in [*v["subsets"].items(), ("all", v["overall"])]:
        bold = "**" if name == "all" else ""
        print(f"| {name} | {bold}{m['precision']:.2%}{bold} | {bold}{m['recall']:.2%}{bold} | {m['agreement']:.2%} |")
    pub = v["published"]
    print(f"| reference tool (CoGnition README) | {pub['precision']:.2%} | {pub['recall']:.2%} | |")
    ours, human = v["cter"]["ours"], v["cter"]["human"]
    print(
        f"\nOn those {v['overall']['n']:,} outputs our CTER gives instance {ours['instance']:.2%} / aggregate "
        f"{ours['aggregate']:.2%}; the human labels give {human['instance']:.2%} / {human['aggregate']:.2%} "
        f"(`{v['signature']}`)."
    )


if __name__ == "__main__":
    main()
