"""A model whose logits blew up, said on the console: a loss or a token's log-probability far below anything a
sane softmax gives.

A reference token scored below -`BLOWUP_NATS` (50 nats: probability under 2e-22), or a validation loss above 50
nats a token, needs logits that differ by 50 or more: a model wrong but well-behaved is not that sure (a uniform
guess over 10^6 words is 13.8 nats). In this toolkit it is the signature of the feedback blow-up that
docs/papers/lexicon.md describes ("A caution on the reference decoder": with `model.combine_feed`, the fed-back
vector grows geometrically with the output length), which leaves exact match intact on short outputs while long
ones score -9,000 (the Colors lexical run: `valid_loss 382.7`, exact match 0.80). `structseq train` (its
validation line) and `structseq score` print the warning; the numbers themselves are left as they are."""

from __future__ import annotations

from collections.abc import Sequence

#: nats: a token's log-probability below minus this, or a per-token loss above it, is taken as a blow-up
BLOWUP_NATS = 50.0
WHY = (
    f"logits this large (threshold {BLOWUP_NATS:g} nats: probability < 2e-22) mean the model's activations blew "
    "up, usually on long outputs (with model.combine_feed, the fed-back vector grows with the length: "
    "docs/papers/lexicon.md, 'A caution on the reference decoder'); exact match on short outputs can still look fine"
)


def loss_warning(loss: float, name: str = "valid_loss") -> str | None:
    """The warning for a per-token loss above `BLOWUP_NATS`, else None."""
    if not loss > BLOWUP_NATS:  # NaN is its own error elsewhere
        return None
    return f"warning: {name} {loss:.4g} nats a token: {WHY}"


def token_warning(token_scores: Sequence[Sequence[float]], skip: Sequence[Sequence[bool]] = ()) -> str | None:
    """The warning for scored targets (each its tokens' log-probabilities) holding a token below -`BLOWUP_NATS`;
    a token whose `skip` flag is set (a special output a head masks on purpose) is not a blow-up."""
    kept = [[x for j, x in enumerate(s) if not (skip and skip[i][j])] for i, s in enumerate(token_scores)]
    low = [(min(s), i) for i, s in enumerate(kept, 1) if s and min(s) < -BLOWUP_NATS]
    if not low:
        return None
    worst, where = min(low)
    return (
        f"warning: {len(low)} of {len(token_scores)} targets hold a token scored below -{BLOWUP_NATS:g} nats "
        f"(lowest {worst:.4g}, pair {where}): {WHY}"
    )
