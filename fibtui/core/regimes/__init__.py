"""Regimes from the real workloads: which axes vary, bands along them, each band's share of
latency, outliers, representative workloads and the (NCU-filled later) shape matrix.

Nothing here knows an axis name: the definition says which axes are variable, the workloads say
which of those actually vary.

Bands
    - no varying axis: one band, ``all``;
    - one varying axis: one band per distinct value when there are at most :data:`MAX_BANDS`
      of them; otherwise power-of-two bins (``[1, 1], [2, 3], [4, 7], ...``, widened by powers of
      two until at most :data:`MAX_BANDS` remain) when the values spread that far, else quantile
      bins of about equal workload counts (a value is never split across bins);
    - several varying axes: coupled regimes. Each axis is binned as above with at most
      :data:`MAX_BINS_COUPLED` bins, and the combinations that actually occur become bands. A tiny
      one (at most :data:`TINY_WORKLOADS` workloads or under :data:`TINY_SHARE` of them, *and*
      under :data:`TINY_LATENCY_SHARE` of the latency when there is latency) is merged into its
      nearest neighbour (bin-index distance, then the heavier one), and merging goes on while
      there are more than :data:`MAX_BANDS` (lightest first). A merged band's ``filter`` is its bounding box; ``members`` lists the
      exact combinations in it.

Latency
    Per workload, the mean of its PASSED latencies (rows may hold repeats). A band's
    ``latency_share`` is the sum of its workloads' latencies over the sum over all workloads with
    a latency (so shares sum to 1). Without results every latency field is null (counts only).

Outliers (about a third of the latency)
    - a workload holding at least :data:`OUTLIER_SHARE` of the total latency (and at least twice
      an even share, 2/n) leaves its band and becomes a band of its own, ``outlier <uuid>``;
    - a band holding at least :data:`OUTLIER_SHARE` and at least twice its share of workloads is
      flagged as an outlier regime (never merged away).

Representatives
    3-4 workloads (2-3 when the definition has more than :data:`MANY_WORKLOADS`), each with its
    reason, picked in this order until the target is reached: the user's pins; outlier
    workloads; the heaviest band (its boundary workload when it holds the smallest or largest,
    else its typical workload: the one closest to the band's median latency); the largest and the
    smallest workload ("size" is the product of the varying axes); then the next heaviest bands.
    Unpinned workloads are never picked automatically (the next one in line takes the role).
    Pins live in the workspace's ``fibtui.toml`` (``[regimes] pinned / unpinned``).

The modules, one concern each (every public name is importable from ``fibtui.core.regimes``):
``model`` (limits, bands, the report), ``binning`` (one axis), ``latency`` (per workload),
``derived`` (derived axes), ``analysis`` (:func:`analyze`), ``representatives`` (and the shape
matrix) and ``pins``.
"""

from __future__ import annotations

from fibtui.core.regimes.analysis import analyze as analyze
from fibtui.core.regimes.analysis import remember_shares as remember_shares
from fibtui.core.regimes.analysis import shares_key as shares_key
from fibtui.core.regimes.analysis import shares_seen as shares_seen
from fibtui.core.regimes.binning import axis_bins as axis_bins
from fibtui.core.regimes.derived import derived_axes as derived_axes
from fibtui.core.regimes.latency import per_workload_latency as per_workload_latency
from fibtui.core.regimes.model import MANY_WORKLOADS as MANY_WORKLOADS
from fibtui.core.regimes.model import MAX_BANDS as MAX_BANDS
from fibtui.core.regimes.model import MAX_BINS_COUPLED as MAX_BINS_COUPLED
from fibtui.core.regimes.model import OUTLIER_SHARE as OUTLIER_SHARE
from fibtui.core.regimes.model import QUANTILE_BINS as QUANTILE_BINS
from fibtui.core.regimes.model import RESERVED_COLUMNS as RESERVED_COLUMNS
from fibtui.core.regimes.model import SPEED_OF_LIGHT_CONVENTION as SPEED_OF_LIGHT_CONVENTION
from fibtui.core.regimes.model import TINY_LATENCY_SHARE as TINY_LATENCY_SHARE
from fibtui.core.regimes.model import TINY_SHARE as TINY_SHARE
from fibtui.core.regimes.model import TINY_WORKLOADS as TINY_WORKLOADS
from fibtui.core.regimes.model import Band as Band
from fibtui.core.regimes.model import FilterValue as FilterValue
from fibtui.core.regimes.model import RegimeReport as RegimeReport
from fibtui.core.regimes.model import Representative as Representative
from fibtui.core.regimes.model import ShapeMatrixRow as ShapeMatrixRow
from fibtui.core.regimes.pins import automatic as automatic
from fibtui.core.regimes.pins import load_pins as load_pins
from fibtui.core.regimes.pins import pin as pin
from fibtui.core.regimes.pins import unpin as unpin
from fibtui.core.regimes.representatives import attach_kernel_evidence as attach_kernel_evidence
from fibtui.core.regimes.representatives import representatives as representatives
from fibtui.core.regimes.representatives import shape_matrix as shape_matrix
from fibtui.core.regimes.representatives import smallest_per_band as smallest_per_band
