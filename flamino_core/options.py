"""The choices the command line, batch jobs and the app offer, in one module that imports only
the standard library's ``dataclasses`` and ``enum``.

``flamino --help`` builds its parser from these without loading NumPy or JAX; the modules
that act on a choice import it from here, so each list is written once. A new scoring strategy
is one ``Strategy`` in ``STRATEGIES``: ``flamino score``, ``flamino batch score``, ``flamino
variants``/``dms``, ``scores.substitution_map``, ``variants.scoring`` (with its pass count,
``variant_passes``) and the app's choices read it from there.
"""

import dataclasses
import enum

# Sequences longer than ESM-2's 1022 training residues: overlapping windows averaged where
# they overlap, the first 1022 residues, or one pass over everything (see ``windows``).
LONG_POLICIES = ("window", "truncate", "full")



KINDS = ("map", "variant", "sequence")


@dataclasses.dataclass(frozen=True)
class Strategy:
    """A scoring strategy, declared once: what it runs, what it reports and where it is offered.

    ``kinds`` says which front ends offer it (``names(kind)``):

    * ``map``: the score of every single substitution of a sequence (``flamino score``, ``flamino
      batch score``, the app's maps and score tracks; ``scores.substitution_map`` runs it):
      ``masked`` strategies read one masked pass per position (through the result store,
      ``passes.masked_log_probs``), the others one unmasked pass's log-softmax; ``reduce`` turns
      those (n, vocab) log-probabilities of the scored residues into ``(substitutions (n, 20),
      pseudo-perplexity or None)``: a callable or ``"module:function"`` (imported when first used,
      so this module stays light); None: ``scores.substitution_scores`` and, for masked
      strategies, ``scores.pseudo_perplexity``. ``output`` is what ``flamino score`` and ``flamino
      batch score`` write: ``map`` (a score per position and amino acid) or ``pppl`` (one number
      per record).
    * ``variant``: the user's substitutions (``flamino variants``/``dms``, the Variant effects
      page; ``variants.scoring``): each variant the sum over its mutated positions of the map of
      ``reads`` (default: the strategy itself, which is then a ``map`` one too) at those positions
      only (masked: a pass per distinct mutated position; unmasked: one pass, a window each);
      ``joint``: a multi-mutant's positions also masked together in one pass (``non_additivity``).
    * ``sequence``: whole mutated sequences, indels and stops too (``variants.sequence_scores``):
      PLL(mutant) - PLL(wild type); ``masked``: PLL(x) = sum_i log p(x_i | x with i masked), a
      masked pass per residue of each sequence (ProteinGym's indel score); otherwise the unmasked
      approximation sum_i log p(x_i | x), one pass per sequence (ESM Variants' PLLR, Brandes et al.
      2023); ``per_residue``: each PLL divided by its sequence's length before the difference (ESM
      Variants' ``weighted`` PLLR), so a deletion is not favoured for holding fewer terms.

    ``help``: one line for ``--help``; ``map_label``/``list_label``: the app's choice among maps
    and among variant strategies (default: "name — help"). ``cheaper``: the strategy the app
    offers instead of a long job of this one (``cheaper_with_indels``: when the list holds indels,
    stops or frameshifts, which only a sequence strategy scores: the unmasked approximation of the
    same score, ESM Variants' PLLR).
    """

    name: str
    help: str  # one line: the command line's --help and the app's choice
    masked: bool
    output: str = "map"  # "map" or "pppl"
    reduce: object = None
    kinds: tuple = ("map",)
    map_label: str = ""
    list_label: str = ""
    reads: str = ""  # variant: the map strategy its sums read (default: its own name)
    joint: bool = False
    per_residue: bool = False
    cheaper: str = ""
    cheaper_with_indels: str = ""

    def __post_init__(self):
        if self.output not in ("map", "pppl"):
            raise ValueError(f"strategy {self.name}: output must be 'map' or 'pppl', not {self.output!r}")
        if not set(self.kinds) <= set(KINDS) or ("variant" in self.kinds and "sequence" in self.kinds):
            raise ValueError(f"strategy {self.name}: kinds among {KINDS}, not both variant and sequence")

    @property
    def whole_sequences(self) -> bool:
        """Scores whole mutated sequences (indels, stops): a ``sequence`` strategy."""
        return "sequence" in self.kinds

    @property
    def per_record(self) -> bool:
        """Gives one number per record (``output`` ``pppl``), not a map."""
        return self.output == "pppl"

    @property
    def exact_pll(self) -> bool:
        """The exact PLL ratio: a masked pass per residue of every whole sequence, unnormalised
        (``pll``; its pass count is the length times the sequences)."""
        return self.whole_sequences and self.masked and not self.per_residue

    @property
    def reads_structure(self) -> bool:
        """A structure-aware model's 3Di letters are read: the masked passes of the mutated
        positions themselves (the sequence strategies mask other sequences)."""
        return self.masked and "variant" in self.kinds

    @property
    def map_name(self) -> str:
        """The map strategy a ``variant`` strategy's sums read."""
        return self.reads or self.name

    def label(self, kind: str) -> str:
        """The app's choice of this strategy among the ``kind`` ones."""
        own = self.map_label if kind == "map" else self.list_label
        return own or f"{self.name} — {self.help}"


# Every scoring strategy (Meier et al. 2021's single-substitution scores; ProteinGym's scores of
# the user's variants; PLL ratios of whole sequences). A dict, so a strategy added at run time (a
# plugin, a test) is seen by every front end built after it.
STRATEGIES = {
    strategy.name: strategy
    for strategy in (
        Strategy("masked-marginals", "exact: one masked pass per position; gives pseudo-perplexity", masked=True,
                 kinds=("map", "variant"), cheaper="wt-marginals",
                 map_label="masked-marginals — exact: one masked pass per position (slower), gives pseudo-perplexity",
                 list_label="masked-marginals — one masked pass per mutated position (ProteinGym's ESM score)"),
        Strategy("wt-marginals", "fast: one unmasked pass", masked=False, kinds=("map", "variant"),
                 list_label="wt-marginals — one unmasked pass (fast, approximate)"),
        Strategy("pppl", "pseudo-perplexity only: the masked-marginals passes", masked=True, output="pppl",
                 map_label="pppl — pseudo-perplexity: the masked passes of masked-marginals"),
        Strategy("joint-masked", "a multi-mutant's positions masked together", masked=True, kinds=("variant",),
                 reads="masked-marginals", joint=True, cheaper="masked-marginals",
                 list_label="joint-masked — a multi-mutant's positions masked together (shows non-additivity)"),
        Strategy("pll", "exact PLL ratio: a masked pass per residue of each sequence", masked=True,
                 kinds=("sequence",), cheaper="masked-marginals", cheaper_with_indels="wt-pll-approx",
                 list_label="pll — pseudo-log-likelihood of mutant minus wild type; also indels and stops (slow: L "
                            "passes per variant)"),
        Strategy("pll-per-residue", "pll with each PLL divided by its sequence's length", masked=True,
                 kinds=("sequence",), per_residue=True, cheaper_with_indels="wt-pll-approx-per-residue"),
        Strategy("wt-pll-approx", "ESM Variants' PLLR: one unmasked pass per sequence", masked=False,
                 kinds=("sequence",),
                 list_label="wt-pll-approx — pll's one-pass approximation (ESM Variants' PLLR): indels and stops, "
                            "cheap"),
        Strategy("wt-pll-approx-per-residue", "wt-pll-approx per residue (ESM Variants' weighted PLLR)",
                 masked=False, kinds=("sequence",), per_residue=True),
    )
}
DEFAULT_STRATEGY = "masked-marginals"
DEFAULT_VARIANT_STRATEGY = "masked-marginals"


def names(*kinds: str) -> tuple:
    """The strategies of any of ``kinds``, in declaration order (``flamino score`` and ``flamino
    batch score`` offer ``map``; ``flamino variants``/``dms`` and the Variant effects page
    ``variant`` and ``sequence``)."""
    return tuple(name for name, strategy in STRATEGIES.items() if set(kinds) & set(strategy.kinds))


def map_strategies() -> tuple:
    """The strategies that give a substitution map (the score tracks, the app's maps)."""
    return tuple(name for name in names("map") if STRATEGIES[name].output == "map")


def scoring_strategies() -> tuple:
    """What ``flamino variants`` and ``flamino dms`` take and the Variant effects page offers: the
    substitution strategies, then those of whole sequences."""
    return names("variant", "sequence")


def strategy_of(name: str, *kinds: str) -> Strategy:
    """The declaration of ``name`` (one of ``kinds``, when given), or a ValueError listing the choices."""
    offered = names(*kinds) if kinds else tuple(STRATEGIES)
    if name not in offered:
        raise ValueError(f"unknown scoring strategy {name!r}; choose from {', '.join(offered)}")
    return STRATEGIES[name]


# What ``flamino suggest --strategies`` and ``flamino fit --zero-shot`` offer: the substitution
# strategies and pll (a zero-shot score of substitutions; the other sequence strategies are its
# variants for indels).
VARIANT_STRATEGIES = ("masked-marginals", "wt-marginals", "joint-masked", "pll")

# What a predictor fitted on the user's labels reads (``predictors.features``): the model's mean
# embedding, one-hot + the model's zero-shot score (Hsu et al. 2022), or one-hot alone.
PREDICT_FEATURES = ("embedding", "augmented", "onehot")
# PLL costs L x (variants + 1) masked passes. A hosted server already accepts one masked scan of
# its longest allowed record (FLAMINO_MAX_RESIDUES, 2,000 residues: 2,000 passes; a 300-residue
# scan takes about 15 s with t6 on 2 cores, docs/benchmarks.md), so PLL is held to the same
# number of passes: no PLL request costs more than the heaviest job the server takes anyway.
PLL_HOSTED_MAX_PASSES = 2_000


class Precision(enum.StrEnum):
    """A precision mode, declared once: the engine's (``hardware.PRECISIONS``, ``FLAMINO_PRECISION``)
    and ESMFold's stem's (``STEM_PRECISIONS``, ``--stem-precision``) are the same concept. A
    ``StrEnum``: equal to its name as text, so the doors (argparse, the app's widgets, the
    environment) may hand either and links, keys and files keep the name. Only ``FP32`` gives the
    reference's numbers; the others are opt-in and labelled."""

    FP32 = "fp32"
    BF16 = "bf16"
    INT8 = "int8"


class FoldPrecision(enum.StrEnum):
    """ESMFold (v1)'s whole-fold precision (``flamino fold --fold-precision``; no setting yet): ``FP32``,
    the reference's numbers; ``FAST``, opt-in and labelled: the trunk's dense layers and its
    triangular and attention products on bf16 operands with fp32 accumulation, the stem in the
    engine's bf16 mode, layer norms, softmax, the structure module and the heads in fp32
    (``weights.esmfold.with_fold_precision``). Apart from ``Precision``: not an engine mode."""

    FP32 = "fp32"
    FAST = "fast"


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
