"""The choices the command line, batch jobs and the app offer, in one module that imports only
the standard library's ``dataclasses``.

``flamino --help`` builds its parser from these without loading NumPy or JAX; the modules
that act on a choice import it from here, so each list is written once. A new whole-sequence
scoring strategy is one ``Strategy`` in ``STRATEGIES``: ``flamino score``, ``flamino batch
score``, ``scores.substitution_map`` and the app's choices read it from there.
"""

import dataclasses

# Sequences longer than ESM-2's 1022 training residues: overlapping windows averaged where
# they overlap, the first 1022 residues, or one pass over everything (see ``windows``).
LONG_POLICIES = ("window", "truncate", "full")



@dataclasses.dataclass(frozen=True)
class Strategy:
    """A whole-sequence scoring strategy: what it runs and what it reports.

    ``scores.substitution_map`` runs it: ``masked`` strategies read one masked pass per position
    (through the result store, ``passes.masked_log_probs``), the others one unmasked pass's
    log-softmax; ``reduce`` turns those (n, vocab) log-probabilities of the scored residues into
    ``(substitutions (n, 20), pseudo-perplexity or None)``: a callable or ``"module:function"``
    (imported when first used, so this module stays light); None: ``scores.substitution_scores``
    and, for masked strategies, ``scores.pseudo_perplexity``. ``output`` is what ``flamino score``
    and ``flamino batch score`` write: ``map`` (a score per position and amino acid) or ``pppl``
    (one number per record).
    """

    name: str
    help: str  # one line: the command line's --help and the app's choice
    masked: bool
    output: str = "map"  # "map" or "pppl"
    reduce: object = None

    def __post_init__(self):
        if self.output not in ("map", "pppl"):
            raise ValueError(f"strategy {self.name}: output must be 'map' or 'pppl', not {self.output!r}")


# Variant-effect scores of every single substitution (Meier et al. 2021): one masked pass per
# position, one unmasked pass, or the pseudo-perplexity from the masked passes. A dict, so a
# strategy added at run time (a plugin, a test) is seen by every front end built after it.
STRATEGIES = {
    strategy.name: strategy
    for strategy in (
        Strategy("masked-marginals", "exact: one masked pass per position; gives pseudo-perplexity", masked=True),
        Strategy("wt-marginals", "fast: one unmasked pass", masked=False),
        Strategy("pppl", "pseudo-perplexity only: the masked-marginals passes", masked=True, output="pppl"),
    )
}
DEFAULT_STRATEGY = "masked-marginals"


def map_strategies() -> tuple:
    """The strategies that give a substitution map (the score tracks, the app's maps)."""
    return tuple(name for name, strategy in STRATEGIES.items() if strategy.output == "map")


# Scores of the user's own variants, as ProteinGym scores ESM-2 (see ``variants.scoring``):
# per mutated position masked, one unmasked pass, all of a multi-mutant's positions masked at
# once, or the pseudo-log-likelihood ratio of mutant and wild type.
VARIANT_STRATEGIES = ("masked-marginals", "wt-marginals", "joint-masked", "pll")
DEFAULT_VARIANT_STRATEGY = "masked-marginals"


@dataclasses.dataclass(frozen=True)
class SequenceStrategy:
    """A score of whole mutated sequences, which may differ from the wild type in length
    (indels, stops): PLL(mutant) - PLL(wild type) (``variants.sequence_scores``).

    ``masked``: PLL(x) = sum_i log p(x_i | x with i masked), one masked pass per residue of each
    sequence (ProteinGym's indel score for masked models); otherwise the unmasked approximation,
    sum_i log p(x_i | x), one pass per sequence (ESM Variants' PLLR, Brandes et al. 2023).
    ``per_residue``: each PLL divided by its sequence's length before the difference (ESM
    Variants' ``weighted`` PLLR), so a deletion is not favoured for holding fewer terms.
    """

    name: str
    masked: bool
    per_residue: bool
    help: str


# Every mutation list entry (substitutions, indels, stops) scored as a whole sequence. ``pll`` is
# also a substitution strategy above: the same score, now for any entry.
SEQUENCE_STRATEGIES = {
    strategy.name: strategy
    for strategy in (
        SequenceStrategy("pll", True, False, "exact PLL ratio: a masked pass per residue of each sequence"),
        SequenceStrategy("pll-per-residue", True, True, "pll with each PLL divided by its sequence's length"),
        SequenceStrategy("wt-pll-approx", False, False, "ESM Variants' PLLR: one unmasked pass per sequence"),
        SequenceStrategy("wt-pll-approx-per-residue", False, True, "wt-pll-approx per residue (ESM Variants' "
                                                                  "weighted PLLR)"),
    )
}
# What ``flamino variants`` and ``flamino dms`` take: the substitution strategies, then the
# sequence strategies not among them (the Variant effects page offers the same).
SCORING_STRATEGIES = VARIANT_STRATEGIES + tuple(name for name in SEQUENCE_STRATEGIES if name not in VARIANT_STRATEGIES)
# What a predictor fitted on the user's labels reads (``predict.features``): the model's mean
# embedding, one-hot + the model's zero-shot score (Hsu et al. 2022), or one-hot alone.
PREDICT_FEATURES = ("embedding", "augmented", "onehot")
# PLL costs L x (variants + 1) masked passes. A hosted server already accepts one masked scan of
# its longest allowed record (FLAMINO_MAX_RESIDUES, 2,000 residues: 2,000 passes; a 300-residue
# scan takes about 15 s with t6 on 2 cores, docs/benchmarks.md), so PLL is held to the same
# number of passes: no PLL request costs more than the heaviest job the server takes anyway.
PLL_HOSTED_MAX_PASSES = 2_000

# Tokens per forward pass: rows x padded width of one batch (see ``planner.plan``).
DEFAULT_TOKEN_BUDGET = 8192

# Contact precision (``structure.contacts``): sequence-separation ranges, inclusive bounds
# (None: no upper bound), as fair-esm's evaluate_prediction; cutoffs: label -> k in floor(L / k).
SEPARATION_RANGES = {"short": (6, 11), "medium": (12, 23), "long": (24, None), "all": (6, None)}
CONTACT_CUTOFFS = {"L": 1, "L/2": 2, "L/5": 5}

# What ``flamino embed --include`` can write into its .npz file.
EMBED_PARTS = ("mean", "per_tok", "logits", "attentions", "contacts")

# What ``flamino batch`` can write into its Parquet shards (per-residue maps do not fit a row).
BATCH_EMBED_PARTS = ("mean", "per_tok", "logits")
BATCH_SCORE_PARTS = ("mean",)
DEFAULT_SHARD_SIZE = 1000  # records per shard: the unit of work and of resumption
