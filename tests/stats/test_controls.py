"""Claims that hold by construction are controls (issue 46, finding 7): the hidden-size claim
reads d on every float32 softmax, so it is shown as a control that passed, never counted as
empirical support in the headline or as a decisive verdict in the matrix."""

from pathlib import Path

import pandas as pd
import yaml

from audit.report import render
from audit.report.scales import DECISIVE
from audit.stats import controls
from audit.stats.claims import COLUMNS, claims_table
from audit.stats.io import Settings, load_config

ROOT = Path(__file__).resolve().parents[2]
CLAIM = "softmax-outputs-reveal-hidden-size"


def test_the_hidden_size_claim_is_judged_as_a_control():
    config = load_config(ROOT / "configs" / "default.yaml")
    claim = next(c for c in config["claims"] if c["id"] == CLAIM)
    assert claim["by_construction"].startswith("a softmax's log-probabilities are W h + b - logsumexp")
    runs = pd.DataFrame([dict(corpus="ptb", head="softmax", seed=str(s), status="ok", test_ppl=80.0 + s,
                              hidden_gap_miss=0.0) for s in range(10)])
    row = claims_table(runs, dict(config, claims=[claim]), Settings(), None, None).iloc[0]
    assert row["verdict"] == controls.PASSED and controls.PASSED not in DECISIVE
    assert row["reason"].startswith("by construction: a softmax's log-probabilities")
    assert "; the control: supported: rate of runs with hidden_gap_miss > 0 = 0/10" in row["reason"]
    missed = claims_table(runs.assign(hidden_gap_miss=3.0), dict(config, claims=[claim]), Settings(), None, None).iloc[0]
    assert missed["verdict"] == controls.FAILED
    # four runs cannot show a rate below 0.5 (0/4: Clopper-Pearson's upper end 0.53): undecided,
    # still a control, not an inconclusive claim
    few = claims_table(runs.head(4), dict(config, claims=[claim]), Settings(), None, None).iloc[0]
    assert few["verdict"] == controls.UNDECIDED and "the control: inconclusive" in few["reason"]
    # a claim with no test keeps its "not run" reason, so the page lists it as not tested
    absent = claims_table(runs.drop(columns="hidden_gap_miss"), dict(config, claims=[claim]), Settings(), None, None)
    assert absent.iloc[0]["reason"].startswith("not run")
    plain = dict(claim)
    plain.pop("by_construction")
    assert claims_table(runs, dict(config, claims=[plain]), Settings(), None, None).iloc[0]["verdict"] == "supported"


def test_the_headline_counts_controls_apart(tmp_path):
    runs = tmp_path / "runs.csv"
    pd.DataFrame([dict(corpus="ptb", head="softmax", seed="1", status="ok", test_ppl=80.0)]).to_csv(runs, index=False)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump({"study": "t"}))
    claims = tmp_path / "claims.csv"
    pd.DataFrame([dict(claim_id="a", corpus="ptb", statement="a", source="s", verdict="supported", reason="r",
                       kind="comparison", expect="lower"),
                  dict(claim_id=CLAIM, corpus="ptb", statement="b", source="s", verdict=controls.PASSED,
                       reason="by construction: x; the control: supported: y", kind="one_sample", expect="below")]
                 ).reindex(columns=COLUMNS).to_csv(claims, index=False)
    html = render.render(str(runs), str(tmp_path / "c.yaml"), [str(claims)], [])
    head = html.split("<nav")[0]
    assert '<span class="badge v-supported">1 supported</span>' in head
    assert ("Controls (claims that hold by construction, not evidence): "
            '<span class="badge v-control_passed">1 control passed (holds by construction)</span>') in head
