"""The page as data: headline, grouping and order, flaky and refused cells, infra failures, GPUs,
the nightly strip.  No browser: `build_view` is a pure function of the runs."""

from __future__ import annotations

import dataclasses
import datetime as dt

from torchbisect.bench.synthetic import synthetic_run as run
from torchbisect.model import Channel, Verdict
from torchbisect.outcome import BisectResult, Direction, NightlyPoint
from torchbisect.page.headline import build_headline
from torchbisect.page.timeline import build_timeline
from torchbisect.report import build_view
from torchbisect.report.probe_files import cell_for

NOW = dt.datetime(2026, 3, 20, 12, 0, tzinfo=dt.timezone.utc)
BAD = {"capture_data_ptr": (5, 5), "capture_write": (5, 5)}
GOOD = {"capture_data_ptr": (0, 5), "capture_write": (0, 5)}
REFUSED = {"capture_data_ptr": Verdict.REFUSED, "capture_write": Verdict.REFUSED}


def _rows(page, gpu="NVIDIA H200"):
    section = next(s for s in page.sections if s.gpu == gpu)
    return [(g.channel, r.label) for g in section.groups for r in g.rows]


def _bisection(before: str, after: str, direction=Direction.REGRESSION, url="") -> BisectResult:
    def point(d: str, v: str) -> NightlyPoint:
        return NightlyPoint(
            date=d,
            version=f"2.16.0.dev{d.replace('-', '')}+cu132",
            verdict=v,
            main_sha=d.replace("-", "") * 5,
        )

    good, bad = ("good", "bad") if direction is Direction.REGRESSION else ("bad", "good")
    return BisectResult(
        direction=direction,
        case="capture_data_ptr",
        cuda="cu132",
        python="3.12",
        before=point(before, good),
        after=point(after, bad),
        probes=5,
        compare_url=url,
    )


def test_headline_is_the_range_of_affected_stable_releases():
    runs = [
        run("2.15.0+cu132", BAD),
        run("2.11.0+cu130", BAD),
        run("2.13.0+cu130", BAD),
        run("2.10.0+cu128", GOOD),
        run("2.16.0.dev20260301+cu132", GOOD),
        run("2.9.0+cu128", BAD, channel=Channel.TEST),
    ]  # rc and nightly do not count
    assert build_headline("NVIDIA H200", runs, []).text == (
        "2.11.0 – 2.15.0 affected on NVIDIA H200, not measured between 2.11.0 and 2.13.0, nor "
        "between 2.13.0 and 2.15.0 (since 2.11.0: 2.10.0 before it was measured not affected)"
    )  # a regression says where it began (issue 52.3); 2.12 and 2.14 were never measured


def test_headline_splits_ranges_at_a_release_that_is_not_affected():
    runs = [run("2.3.0+cu121", BAD), run("2.4.0+cu121", GOOD), run("2.5.0+cu124", BAD)]
    assert build_headline("H200", runs, []).text == (
        "2.3.0 and 2.5.0 affected on H200 (again since 2.5.0: 2.4.0 before it was measured not "
        "affected)"
    )


def test_headline_counts_refused_as_not_affected_and_says_what_was_tested():
    runs = [run("2.16.0+cu132", REFUSED), run("2.17.0+cu132", GOOD)]
    text = build_headline("H200", runs, []).text
    assert text == "No tested stable release is affected on H200 (2.16.0 – 2.17.0 tested)"


def test_headline_ignores_infrastructure_failures():
    runs = [run("2.11.0+cu130", BAD), run("2.15.0+cu132", infra="pip: no space left on device")]
    headline = build_headline("H200", runs, [])
    assert headline.text == "2.11.0 affected on H200 (releases before 2.11.0 were not tested)"
    assert headline.tested == ("2.11.0",)


def test_skipped_probes_without_a_gpu_are_no_verdict_at_all():
    skipped = {
        name: Verdict.SKIPPED for name in ("capture_data_ptr", "control_clone", "control_stale")
    }
    headline = (
        build_view([run("2.13.0+cpu", skipped, gpu="none")], [], generated=NOW).sections[0].headline
    )
    assert headline.text == "No verdict for stable releases without a GPU (2.13.0 probed)"
    assert headline.tested == () and headline.unclear == ("2.13.0",)


def test_one_affected_cuda_variant_makes_the_release_affected():
    runs = [run("2.11.0+cu126", GOOD), run("2.11.0+cu130", BAD)]
    assert build_headline("H200", runs, []).affected_ranges == (("2.11.0", "2.11.0"),)


def test_nightly_edges_come_from_tested_nightlies_as_bounds():
    runs = [
        run(f"2.16.0.dev202603{d:02d}+cu132", o)
        for d, o in ((1, GOOD), (3, BAD), (5, BAD), (9, REFUSED))
    ]
    headline = build_headline("H200", runs, [])
    assert (headline.first_affected.date, headline.first_affected.previous) == (
        "2026-03-03",
        "2026-03-01",
    )
    assert headline.first_fixed.date == "2026-03-09" and not headline.first_fixed.bisected
    assert "not bisected" in headline.first_affected.text


def test_an_edge_between_nightlies_of_consecutive_days_is_exact_without_a_bisection():
    runs = [
        run(f"2.16.0.dev202603{d:02d}+cu132", o)
        for d, o in ((1, GOOD), (2, BAD), (8, BAD), (9, REFUSED))
    ]
    headline = build_headline("H200", runs, [])
    assert headline.first_affected.exact and headline.first_fixed.exact
    assert headline.first_affected.text == (
        "2026-03-02 (exact: tested on consecutive days, last nightly before it measured not "
        "affected: 2026-03-01)"
    )
    assert "not bisected" not in headline.first_fixed.text


def test_a_nightly_fixed_and_then_affected_again_is_no_fix():
    """The fix is said after the newest affected nightly: 03-02 was not affected, but 03-03 and
    03-04 are again, so nothing is fixed (the page had said "first fixed nightly 2026-03-02,
    exact")."""
    history = ((1, BAD), (2, GOOD), (3, BAD), (4, BAD))
    runs = [run(f"2.16.0.dev202603{d:02d}+cu132", o) for d, o in history]
    headline = build_headline("H200", runs, [])
    assert headline.first_affected.date == "2026-03-01" and headline.first_fixed is None
    runs.append(run("2.16.0.dev20260306+cu132", GOOD))
    fixed = build_headline("H200", runs, []).first_fixed
    assert (fixed.date, fixed.previous, fixed.exact) == ("2026-03-06", "2026-03-04", False)
    assert fixed.text == (
        "2026-03-06 (not bisected, last nightly before it measured affected: 2026-03-04)"
    )


def test_a_nightly_fix_holds_for_every_cuda_tag_that_was_affected():
    """cu128 was affected on every nightly it ran and never ran 03-02: cu126's good 03-02 is no
    fix of cu128's, and "Fixed builds" says why none is claimed."""
    from torchbisect.page.advice import fix_line

    runs = [
        run("2.16.0.dev20260301+cu126", BAD),
        run("2.16.0.dev20260301+cu128", BAD),
        run("2.16.0.dev20260302+cu126", GOOD),
    ]
    headline = build_headline("H200", runs, [])
    assert headline.first_fixed is None
    assert fix_line(headline).endswith(
        "no fixed nightly: 2026-03-02 was measured not affected, but never on cu128, where "
        "earlier nightlies were affected: no fix is claimed there"
    )
    runs.append(run("2.16.0.dev20260304+cu126", GOOD))
    runs.append(run("2.16.0.dev20260304+cu128", GOOD))
    fixed = build_headline("H200", runs, [])
    assert (fixed.first_fixed.date, fixed.first_fixed.previous) == ("2026-03-04", "2026-03-01")
    assert fixed.nightly_unclaimed == ""


def test_a_first_affected_nightly_is_bounded_per_gpu_model_as_since_is():
    """Under `cuda: auto` the nightlies move to a newer tag as the plans do: cu128 measured not
    affected on 08-01 and 08-08 bounds the cu130 nightly that turned on 08-15 (per tag it had
    read "no nightly before it was measured not affected")."""
    runs = [
        run("2.9.0.dev20250801+cu128", GOOD),
        run("2.9.0.dev20250808+cu128", GOOD),
        run("2.9.0.dev20250815+cu130", BAD),
        run("2.9.0.dev20250822+cu130", BAD),
    ]
    edge = build_headline("H200", runs, []).first_affected
    assert (edge.date, edge.previous, edge.exact) == ("2025-08-15", "2025-08-08", False)
    another = [run("2.9.0.dev20250814+cu130", GOOD, gpu="NVIDIA H100"), *runs]
    assert build_headline("H200", another, []).first_affected.previous == "2025-08-08"


def test_two_nightlies_of_one_date_are_pooled_not_the_last_one_read():
    """The branch cut publishes two nightlies of one date: 2.9's affected and 2.10's not made
    that day "not affected" for the tag, and both edges came from inconclusive nightlies."""
    odd = {"capture_data_ptr": Verdict.INCONCLUSIVE}
    runs = [
        run("2.9.0.dev20250731+cu128", odd),
        run("2.9.0.dev20250801+cu128", BAD),
        run("2.10.0.dev20250801+cu128", GOOD),
        run("2.10.0.dev20250802+cu128", odd),
    ]
    headline = build_headline("H200", runs, [])
    assert (headline.first_affected.date, headline.first_affected.previous) == ("2025-08-01", "")
    assert headline.first_fixed is None


def test_a_bisection_gives_the_exact_nightly_and_its_compare_link():
    url = "https://github.com/pytorch/pytorch/compare/a...b"
    runs = [run("2.16.0.dev20260301+cu132", GOOD), run("2.16.0.dev20260309+cu132", BAD)]
    headline = build_headline("H200", runs, [_bisection("2026-03-04", "2026-03-05", url=url)])
    assert headline.first_affected.date == "2026-03-05"
    assert headline.first_affected.bisected and headline.first_affected.compare_url == url


def test_rows_are_grouped_by_channel_in_version_and_date_order():
    runs = [
        run("2.16.0.dev20260310+cu132", BAD),
        run("2.15.0+cu132", BAD),
        run("2.10.0+cu128", BAD),
        run("2.9.1+cu128", BAD),
        run("2.16.0.dev20260302+cu132", BAD),
        run("2.11.0a0+gitabc", BAD),
        run("2.16.0+cu132", BAD, channel=Channel.TEST),
        run("2.16.0+cu132", BAD, channel=Channel.DEV, cell_id="dev-my-fix"),
    ]
    assert _rows(build_view(runs, [], generated=NOW)) == [
        ("stable", "2.9.1"),
        ("stable", "2.10.0"),
        ("stable", "2.15.0"),
        ("test", "2.16.0"),
        ("nightly", "2026-03-02"),
        ("nightly", "2026-03-10"),
        ("dev", "2.16.0"),
        ("preinstalled", "2.11.0a0"),
    ]


def test_a_flaky_case_shows_its_stale_fraction():
    page = build_view([run("2.11.0+cu130", {"side_stream": (7, 20)})], [], generated=NOW)
    (cell,) = [c for c in page.sections[0].groups[0].rows[0].cases if c.mark.kind == "flaky"]
    assert (cell.mark.word, cell.mark.note) == ("flaky", "7/20")
    assert cell.rate == "flaky: affected on 7/20 trials (35%)"


def test_refused_reads_as_the_kind_of_fix_it_is():
    page = build_view([run("2.17.0+cu132", REFUSED)], [], generated=NOW)
    row = page.sections[0].groups[0].rows[0]
    assert row.mark.is_safe
    assert f"{row.mark.word} {row.mark.note}" == "refused (a clear error)"


def test_controls_that_behave_are_not_drawn_as_affected():
    page = build_view([run("2.11.0+cu130", BAD)], [], generated=NOW)
    cells = zip(page.columns, page.sections[0].groups[0].rows[0].cases, strict=True)
    controls = [cell for column, cell in cells if column.name.startswith("control")]
    assert [c.mark.word for c in controls] == ["as expected", "as expected"]


def test_an_infrastructure_failure_is_shown_with_its_reason_and_no_verdict():
    page = build_view(
        [
            run("2.12.0+cu130", infra="uv: wheel download failed (HTTP 503)"),
            run("2.11.0+cu130", BAD),
        ],
        [],
        generated=NOW,
    )
    row = next(r for r in page.sections[0].groups[0].rows if r.label == "2.12.0")
    assert (row.mark.kind, row.mark.word) == ("infra", "infra failure")
    assert row.mark.note == "uv: wheel download failed (HTTP 503)"
    assert row.cases == () and not row.mark.is_affected and not row.mark.is_safe


def test_results_from_several_gpus_get_separate_sections_and_headlines():
    runs = [
        run("2.15.0+cu132", BAD, gpu="NVIDIA H200"),
        run("2.15.0+cu132", GOOD, gpu="NVIDIA A100-SXM4-80GB", driver="575.57.08"),
    ]
    page = build_view(runs, [], generated=NOW)
    assert [(s.gpu, s.headline.text) for s in page.sections] == [
        (
            "NVIDIA A100-SXM4-80GB",
            "No tested stable release is affected on NVIDIA A100-SXM4-80GB (2.15.0 tested)",
        ),
        ("NVIDIA H200", "2.15.0 affected on NVIDIA H200 (releases before 2.15.0 were not tested)"),
    ]
    assert [e.driver for s in page.sections for e in s.environments] == ["575.57.08", "580.159.04"]


def test_newest_run_date_is_in_the_headline():
    runs = [
        run("2.15.0+cu132", BAD, started="2026-03-02T07:00:00Z"),
        run("2.11.0+cu130", BAD, started="2026-03-19T23:10:00Z"),
    ]
    assert build_view(runs, [], generated=NOW).newest_run == "2026-03-19"


def _per_date(strip) -> list[str]:
    """The kind of each calendar date: a bar drawn for consecutive dates stands for each."""
    return [s.kind for s in strip.slots for _ in range(s.days)]


def test_timeline_has_one_slot_per_date_and_shows_missing_dates_as_gaps():
    runs = [run(f"2.16.0.dev202603{d:02d}+cu132", BAD) for d in (1, 2, 5)]
    strip = build_timeline(runs, [])
    assert _per_date(strip) == ["aff", "aff", "gap", "gap", "aff"]
    assert (strip.tested, strip.gaps, strip.first, strip.last) == (3, 2, "2026-03-01", "2026-03-05")


def test_timeline_draws_consecutive_dates_of_one_verdict_as_one_bar_that_names_them():
    days = [dt.date(2024, 1, 1) + dt.timedelta(days=i) for i in range(3 * 365)]
    runs = [
        run(f"2.16.0.dev{d:%Y%m%d}+cu132", BAD if i < 700 else GOOD)
        for i, d in enumerate(days)
        if i % 100 != 50
    ]
    strip = build_timeline(runs, [])
    assert len(strip.slots) == 11 + 12 + 1  # 11 missing days between 12 runs; a verdict change
    assert len(_per_date(strip)) == len(days)
    assert strip.slots[0].title == "2024-01-01 … 2024-02-19: affected (50 nightlies)"
    assert strip.slots[1].title == "2024-02-20: no result"


def test_timeline_marks_the_bisected_range_and_links_only_https():
    runs = [run("2.16.0.dev20260301+cu132", GOOD), run("2.16.0.dev20260310+cu132", BAD)]
    good = _bisection(
        "2026-03-04", "2026-03-05", url="https://github.com/pytorch/pytorch/compare/a...b"
    )
    evil = _bisection("2026-03-04", "2026-03-05", url="javascript:alert(1)")
    strip = build_timeline(runs, [good, evil])
    assert [b.compare_url for b in strip.bands] == [good.compare_url, ""]
    band = strip.bands[0]
    assert band.x == 3 * strip.slot and band.w == 2 * strip.slot  # covers the 4th and 5th
    # dates the bisection probed fill their slots; the rest of the range stays a gap
    assert _per_date(strip)[:6] == ["ok", "gap", "gap", "ok", "aff", "gap"]


def test_cells_of_recorded_probe_documents_are_inferred_from_the_version():
    assert cell_for("2.15.0+cu132", "3.12.3").id == "stable-2.15.0-cu132-cp312"
    nightly = cell_for("2.16.0.dev20260301+cu132", "3.12.3")
    assert (nightly.id, nightly.date) == ("nightly-20260301-cu132-cp312", "2026-03-01")
    assert cell_for("2.11.0a0+ea0fca7b9c.nv26.01", "3.12.3").channel is Channel.PREINSTALLED


def test_an_unknown_sha_is_said_as_unknown_never_an_empty_code_span():
    from torchbisect.page.bisections import bisect_view
    from torchbisect.report.writers.bisection_text import render_markdown as bisection_markdown

    b = _bisection("2026-03-04", "2026-03-05")
    b = dataclasses.replace(b, before=dataclasses.replace(b.before, main_sha="", git_version=""))
    text = bisection_markdown(b)
    assert "``" not in text and "| unknown |" in text
    facts = dict(bisect_view(b).facts)
    assert facts["commits"].startswith("unknown … ")


def test_several_gpu_models_side_by_side_with_what_holds_across_them_and_what_differs(tmp_path):
    from torchbisect.report import render_runs

    runs = [
        run("2.14.0+cu130", BAD, gpu="NVIDIA H100"),
        run("2.15.0+cu132", BAD, gpu="NVIDIA H100"),
        run("2.14.0+cu130", BAD, gpu="NVIDIA GB300"),
        run("2.15.0+cu132", GOOD, gpu="NVIDIA GB300"),
    ]
    # GB300 was still affected on the 3rd, a day after H100's fix: a real disagreement
    runs += [
        run(f"2.16.0.dev202603{d:02d}+cu132", o, gpu=g)
        for g, d, o in (
            ("NVIDIA H100", 1, BAD),
            ("NVIDIA H100", 2, REFUSED),
            ("NVIDIA GB300", 1, BAD),
            ("NVIDIA GB300", 3, BAD),
            ("NVIDIA GB300", 5, REFUSED),
        )
    ]
    page = build_view(runs, [], generated=NOW)
    c = page.comparison
    assert c.gpus == ("NVIDIA GB300", "NVIDIA H100")
    assert c.headline == (
        "2.14.0 – 2.15.0 affected on at least one of 2 GPU models measured "
        "(NVIDIA GB300, NVIDIA H100) (releases before 2.14.0 were not tested)"
    )
    assert page.title == c.headline
    assert c.differences == (
        "2.15.0: not affected on NVIDIA GB300; affected on NVIDIA H100",
        "first fixed nightly: 2026-03-05 on NVIDIA GB300; 2026-03-02 on NVIDIA H100",
    )
    assert [r.label for r in c.rows if not r.differs] == ["2.14.0", "first affected nightly"]
    # each model keeps its own headline: a verdict is never merged across models; GB300's
    # 2.15.0 was measured on cu132 only, so the cu130 that was affected has no fix measured
    # (issue 53.3): not "fixed in 2.15.0"
    assert [s.headline.claim for s in page.sections] == [
        "2.14.0 affected on NVIDIA GB300",
        "2.14.0 – 2.15.0 affected on NVIDIA H100",
    ]
    assert page.advice.fixes[0].startswith(
        "NVIDIA GB300: 2.15.0 was measured not affected, but "
        "never on cu130, where earlier releases were "
        "affected: no fix is claimed there;"
    )
    render_runs(runs, [], tmp_path, generated=NOW)
    html = " ".join((tmp_path / "index.html").read_text().split())
    assert "The verdict differs between GPU models" in html
    summary = (tmp_path / "summary.md").read_text()
    assert "| **2.15.0** (differs) | not affected | affected |" in summary
    osv = __import__("json").loads((tmp_path / "affected.json").read_text())
    assert osv["affected"][0]["database_specific"]["gpus"] == ["NVIDIA GB300", "NVIDIA H100"]
    assert osv["affected"][0]["versions"] == ["2.14.0", "2.15.0"]
    # a scanner's reader on one model is told the models disagree, in the record itself
    assert osv["affected"][0]["database_specific"]["differs_between_gpus"] == list(c.differences)
    assert osv["details"].endswith(
        "The verdict differs between GPU models (a result on one model is no answer for "
        "another): (1) 2.15.0: not affected on NVIDIA GB300; affected on NVIDIA H100. (2) first "
        "fixed nightly: 2026-03-05 on NVIDIA GB300; 2026-03-02 on NVIDIA H100."
    )
    models = __import__("json").loads((tmp_path / "results.json").read_text())["models"]
    assert models == {
        "measured": ["NVIDIA GB300", "NVIDIA H100"],
        "headline": c.headline,
        "differences": list(c.differences),
        "kinds": [],
    }


def test_one_gpu_model_has_no_comparison():
    assert build_view([run("2.15.0+cu132", BAD)], [], generated=NOW).comparison is None


def _two_models(extra_h100=(), extra_gb300=()):
    runs = [
        run("2.15.0+cu132", BAD, gpu="NVIDIA H100"),
        run("2.15.0+cu132", BAD, gpu="NVIDIA GB300"),
    ]
    runs += [run(f"2.16.0.dev202603{d:02d}+cu132", o, gpu="NVIDIA H100") for d, o in extra_h100]
    runs += [run(f"2.16.0.dev202603{d:02d}+cu132", o, gpu="NVIDIA GB300") for d, o in extra_gb300]
    return build_view(runs, [], generated=NOW).comparison


def test_a_model_that_tested_no_nightly_is_not_tested_there_never_a_disagreement():
    c = _two_models(extra_h100=((1, GOOD), (2, BAD)))
    [edge] = [r for r in c.rows if r.label == "first affected nightly"]
    assert dict(zip(c.gpus, edge.cells, strict=True)) == {
        "NVIDIA GB300": ("none", "not tested"),
        "NVIDIA H100": ("edge", "2026-03-02"),
    }
    assert not edge.differs and c.differences == ()


def test_edges_whose_untested_days_overlap_are_bounds_of_one_edge_not_a_disagreement():
    # H100 tested daily (bad from the 4th); GB300 only on the 1st and the 8th: the 4th lies in
    # GB300's span, so the two models may well agree
    c = _two_models(extra_h100=((1, GOOD), (3, GOOD), (4, BAD)), extra_gb300=((1, GOOD), (8, BAD)))
    [edge] = [r for r in c.rows if r.label == "first affected nightly"]
    assert [text for _, text in edge.cells] == ["2026-03-08", "2026-03-04"]
    assert not edge.differs and c.differences == ()
    # GB300 tested good on the 5th, after H100 turned bad: that is a disagreement
    c = _two_models(
        extra_h100=((1, GOOD), (3, GOOD), (4, BAD)), extra_gb300=((1, GOOD), (5, GOOD), (8, BAD))
    )
    assert c.differences == (
        "first affected nightly: 2026-03-08 on NVIDIA GB300; 2026-03-04 on NVIDIA H100",
    )
    # a model whose tested nightlies never turned bad, tested after the other's edge, disagrees
    c = _two_models(extra_h100=((1, GOOD), (4, BAD)), extra_gb300=((1, GOOD), (6, GOOD)))
    assert c.differences == (
        "first affected nightly: none found on NVIDIA GB300; 2026-03-04 on NVIDIA H100",
    )


def test_the_headline_across_models_never_covers_a_model_without_a_release_verdict():
    runs = [
        run("2.14.0+cu130", GOOD, gpu="NVIDIA H200"),
        run("2.15.0+cu132", GOOD, gpu="NVIDIA H200"),
    ]
    runs += [run(f"2.16.0.dev202603{d:02d}+cu132", BAD, gpu="NVIDIA GB300") for d in (1, 2)]
    c = build_view(runs, [], generated=NOW).comparison
    assert c.headline == (
        "No tested stable release is affected on any of 2 GPU models measured "
        "(NVIDIA GB300, NVIDIA H200) (2.14.0 – 2.15.0 tested); no release "
        "verdict on NVIDIA GB300"
    )
    only_nightlies = [r for r in runs if "dev" in r.cell.version]
    only_nightlies += [run("2.16.0.dev20260301+cu132", GOOD, gpu="NVIDIA H200")]
    c = build_view(only_nightlies, [], generated=NOW).comparison
    assert c.headline == (
        "No verdict for a stable release on any of 2 GPU models measured "
        "(NVIDIA GB300, NVIDIA H200)"
    )


def test_the_headline_across_models_says_each_only_where_every_model_measured_it_affected():
    # both models measured both releases affected (the H100 beside the H200, issue 54)
    both = [
        run(version, BAD, gpu=gpu)
        for version in ("2.14.0+cu130", "2.15.0+cu132")
        for gpu in ("NVIDIA H100", "NVIDIA H200")
    ]
    c = build_view(both, [], generated=NOW).comparison
    assert c.headline == (
        "2.14.0 – 2.15.0 affected on each of 2 GPU models measured "
        "(NVIDIA H100, NVIDIA H200) (releases before 2.14.0 were not tested)"
    )
    # the H100 never measured 2.15.0: that release is affected on one model, not on each
    c = build_view(both[:3], [], generated=NOW).comparison
    assert "affected on at least one of 2 GPU models measured" in c.headline
    # nor when a model failed to judge it (no verdict is not "affected")
    judged_once = both[:3] + [run("2.15.0+cu132", infra="install failed", gpu="NVIDIA H100")]
    c = build_view(judged_once, [], generated=NOW).comparison
    assert "affected on at least one of" in c.headline


def test_a_model_never_affected_has_no_fix_to_compare():
    c = _two_models(extra_h100=((1, BAD), (5, REFUSED)), extra_gb300=((1, GOOD), (6, GOOD)))
    rows = {r.label: r for r in c.rows}
    assert dict(zip(c.gpus, rows["first fixed nightly"].cells, strict=True))["NVIDIA GB300"] == (
        "none",
        "never affected",
    )
    assert not rows["first fixed nightly"].differs
    # the disagreement is the first affected nightly, said once
    assert c.differences == (
        "first affected nightly: none found on NVIDIA GB300; 2026-03-01 on NVIDIA H100",
    )


# -- the page as its readers meet it (issue 35) -------------------------------------------------


def _preinstalled(version: str, *, backend: str = "venv", image: str | None = None):
    made = run(version, BAD, channel=Channel.PREINSTALLED, cell_id="preinstalled")
    cell = dataclasses.replace(made.cell, base_image=image)
    return dataclasses.replace(made, cell=cell, backend=backend)


def test_a_preinstalled_release_is_shown_as_that_release_among_the_stable_ones():
    runs = [
        run("2.15.0+cu132", BAD),
        run("2.12.0+cu130", BAD),
        _preinstalled("2.11.0+cu130", backend="docker", image="torchbisect/h200:torch-2.11.0"),
        _preinstalled("2.11.0a0+gitabc"),
    ]
    page = build_view(runs, [], generated=NOW)
    assert _rows(page) == [
        ("stable", "2.11.0"),
        ("stable", "2.12.0"),
        ("stable", "2.15.0"),
        ("preinstalled", "2.11.0a0"),
    ]
    [release] = [r for r in page.sections[0].groups[0].rows if r.label == "2.11.0"]
    assert release.sub == "cu130 · py3.12 · preinstalled"
    assert dict(release.facts)["from"] == (
        "preinstalled in the image torchbisect/h200:torch-2.11.0, docker backend"
    )
    [other] = page.sections[0].groups[1].rows
    assert dict(other.facts)["from"].startswith("preinstalled: the torch of the python")


def test_versions_and_times_read_as_such():
    from torchbisect.page.rows import cudnn_version

    assert [cudnn_version(v) for v in (91900, 90100, 8902, 8600, None)] == [
        "9.19.0",
        "9.1.0",
        "8.9.2",
        "8.6.0",
        "",
    ]
    made = run("2.15.0+cu132", BAD, started="2026-11-29T23:48:45.379326+00:00")
    made = dataclasses.replace(
        made, result=dataclasses.replace(made.result, env={**made.result.env, "cudnn": 91900})
    )
    facts = dict(build_view([made], [], generated=NOW).sections[0].groups[0].rows[0].facts)
    assert facts["cuDNN"] == "9.19.0" and facts["started"] == "2026-11-29 23:48:45 UTC"


def test_the_log_excerpt_leads_with_the_probe_and_leaves_out_uvs_deprecation_warnings():
    log = (
        "# torchbisect: stable-2.12.0-cu130-cp312 started 2026-11-29T23:48:36Z backend=venv\n"
        "$ /usr/local/bin/uv venv --no-project /w/.torchbisect/venvs/x\n"
        "warning: The `UV_NATIVE_TLS` environment variable is deprecated and will be removed "
        "in a future release. Use `UV_SYSTEM_CERTS` instead.\n"
        "warning: The `native-tls` setting is deprecated and will be removed in a future "
        "release. Use `system-certs` instead.\n"
        " + torch==2.12.0 (from file:///tmp/w/torch-2.12.0-cp312-cp312-linux_x86_64.whl)\n"
        "$ /w/.torchbisect/venvs/x/bin/python /w/probes/stale_replay.py --trials 20\n"
        "[stale_replay] capture_data_ptr         affected       0.8 s (4.4 s wall)\n"
        "[stale_replay] verdict: affected (exit 1) in 29.4 s"
    )
    row = (
        build_view([run("2.12.0+cu130", BAD, log=log)], [], generated=NOW)
        .sections[0]
        .groups[0]
        .rows[0]
    )
    assert row.log.probe.splitlines() == [
        "$ .torchbisect/venvs/x/bin/python probes/stale_replay.py --trials 20",
        "[stale_replay] capture_data_ptr         affected       0.8 s (4.4 s wall)",
        "[stale_replay] verdict: affected (exit 1) in 29.4 s",
    ]
    assert row.log.dropped == 2 and "deprecated" not in row.log.setup
    assert row.log.setup.splitlines()[-1].startswith(" + torch==2.12.0")
    failed = run("2.12.0+cu130", infra="uv: HTTP 503", log="$ uv pip install x\nerror: HTTP 503")
    failed_row = build_view([failed], [], generated=NOW).sections[0].groups[0].rows[0]
    assert failed_row.log.probe == "" and "HTTP 503" in failed_row.log.setup


def test_the_legend_explains_the_states_the_page_shows_and_keeps_the_others():
    page = build_view(
        [run("2.15.0+cu132", BAD), run("2.14.0+cu130", infra="HTTP 503")], [], generated=NOW
    )
    assert [m.word for m, _ in page.legend] == ["affected", "as expected", "infra failure"]
    assert len(page.legend) + len(page.legend_more) == 10
    assert "refused" in [m.word for m, _ in page.legend_more]


def test_a_compile_case_counts_its_stale_variant_as_its_neighbours_do():
    made = run("2.15.0+cu132", {**BAD, "compile_reduce_overhead": Verdict.AFFECTED})
    doc = dict(made.result.raw)
    doc["cases"] = {
        **doc["cases"],
        "compile_reduce_overhead": {
            **doc["cases"]["compile_reduce_overhead"],
            "variants": {
                "inline_inplace": {"outcome": "correct", "stale_trials": 0, "trials": 6},
                "custom_op_data_ptr": {"outcome": "stale", "stale_trials": 4, "trials": 6},
            },
        },
    }
    from torchbisect.model import ProbeResult

    made = dataclasses.replace(made, result=ProbeResult.from_json(doc))
    page = build_view([made], [], generated=NOW)
    row = page.sections[0].groups[0].rows[0]
    cells = dict(zip([c.name for c in page.columns], row.cases, strict=True))
    assert cells["capture_data_ptr"].mark.note == "5/5"
    assert cells["compile_reduce_overhead"].mark.note == "4/6"
    assert cells["compile_reduce_overhead"].rate == (
        "affected on 4/6 calls (67%) in custom_op_data_ptr"
    )


def test_one_gpu_is_one_line_with_the_cuda_runtimes_of_its_builds():
    newer = run("2.15.0+cu132", BAD)
    newer = dataclasses.replace(
        newer,
        result=dataclasses.replace(newer.result, env={**newer.result.env, "cuda_runtime": "13.2"}),
    )
    page = build_view(
        [run("2.12.0+cu130", BAD), run("2.13.0+cu130", BAD), newer], [], generated=NOW
    )
    [env] = page.sections[0].environments
    assert (env.gpu, env.runs, env.cuda_runtimes) == ("NVIDIA H200", 3, (("13.0", 2), ("13.2", 1)))


def test_sibling_pages_say_how_their_runs_were_made_and_when():
    docker = [
        dataclasses.replace(
            run("2.12.0+cu130", BAD, started="2026-12-01T09:10:00Z"), backend="docker"
        )
    ]
    recorded = [dataclasses.replace(run("2.12.0+cu130", BAD), backend="recorded probe JSON")]
    on_docker = build_view(docker, [], generated=NOW, store="results.sqlite")
    from_documents = build_view(recorded, [], generated=NOW)
    assert on_docker.title.endswith("· the docker backend")
    assert on_docker.source == "measured with the docker backend; read from results.sqlite"
    assert on_docker.newest_run == "2026-12-01"
    assert from_documents.title.endswith("· recorded probe documents")
    assert from_documents.newest_run == "not dated (recorded probe documents carry no date)"


def test_a_row_summary_names_the_cases_a_phone_has_no_room_for():
    from torchbisect.page.rows import row_summary

    page = build_view(
        [
            run("2.15.0+cu132", BAD),
            run(
                "2.3.0+cu121",
                {
                    "capture_data_ptr": (5, 5),
                    "capture_write": (5, 5),
                    "compile_reduce_overhead": Verdict.NOT_APPLICABLE,
                    "control_clone": (5, 5),
                },
            ),
        ],
        [],
        generated=NOW,
    )
    rows = {r.label: r for r in page.sections[0].groups[0].rows}
    assert rows["2.15.0"].summary == "all 2 cases affected; controls as expected"
    assert rows["2.3.0"].summary == (
        "2 affected; not applicable: compile (reduce-overhead); controls: control: clone() affected"
    )
    assert row_summary(page.columns, rows["2.15.0"].cases).endswith("controls as expected")


def test_the_upstream_link_reads_as_words():
    from torchbisect.page.advice import link_text, upstream_search
    from torchbisect.page.regression import Regression

    search = upstream_search(Regression(probe="p", title="t", requires_api="torch.cumsum"))
    assert link_text(search) == "pytorch/pytorch issues matching torch.cumsum (a GitHub search)"
    assert link_text("https://github.com/pytorch/pytorch/issues/12345") == (
        "pytorch/pytorch#12345 on GitHub"
    )


def test_long_tokens_may_break_where_a_reader_expects_and_nowhere_else():
    from torchbisect.report.writers.html import breaks

    sha = "9f37c46b1da1d9d38305b030b432631083aaecc0b19a3b70fcf870326a81b337"
    assert str(breaks(f"preinstalled:2.11.0:{sha}")).split("<wbr>") == [
        "preinstalled:2.11.0:",
        sha[:16],
        sha[16:32],
        sha[32:48],
        sha[48:],
    ]
    assert str(breaks("2026-11-29 23:48:45 UTC")) == "2026-11-29 23:48:45 UTC"
    assert str(breaks("torch-2.12.0-cp312.whl <b>")) == "torch-2.12.0-<wbr>cp312.whl &lt;b&gt;"


def test_a_release_another_tag_left_unmeasured_between_two_affected_ones_is_no_break():
    """cu128 was affected in 2.7.0 and 2.9.0 and never ran 2.8.0, which only cu126 measured not
    affected: the page had said "2.5.0 – 2.7.0 and 2.9.0 affected (again since 2.9.0: 2.8.0
    before it was measured not affected)", a fix and a return nobody measured on cu128."""
    runs = [run(f"{v}+cu126", o) for v, o in (("2.7.0", BAD), ("2.8.0", GOOD), ("2.9.0", GOOD))]
    runs += [run(f"{v}+cu128", BAD) for v in ("2.6.0", "2.7.0", "2.9.0")]
    headline = build_headline("H200", runs, [])
    assert headline.unclear == ("2.8.0",) and "2.8.0" not in headline.tested
    assert not headline.course.again and headline.course.after == ""
    assert "again" not in headline.text and "measured not affected" not in headline.text
    runs.append(run("2.8.0+cu128", BAD))
    again = build_headline("H200", runs, [])
    assert again.affected_ranges == (("2.6.0", "2.9.0"),) and again.unclear == ()


def test_a_range_over_a_minor_series_never_measured_says_so():
    """`2.9.0 – 2.12.0 affected` read as covering 2.10, which the matrix left out: the range
    stays (an OSV range spans it too), and the headline says where nothing was measured."""
    runs = [run(f"{v}+cpu", o) for v, o in (("2.8.0", GOOD), ("2.9.0", BAD), ("2.9.1", BAD))]
    runs += [run(f"{v}+cpu", BAD) for v in ("2.11.0", "2.12.0")]
    text = build_headline("NVIDIA H200", runs, []).text
    assert text.startswith(
        "2.9.0 – 2.12.0 affected on NVIDIA H200, not measured between 2.9.1 and 2.11.0 ("
    ), text
    runs.append(run("2.10.0+cpu", BAD))
    assert "not measured" not in build_headline("NVIDIA H200", runs, []).text
    # a new major may have nothing between: 2.11.0 – 3.0.0 names no hole
    major = [run("2.11.0+cpu", BAD), run("3.0.0+cpu", BAD)]
    assert "not measured" not in build_headline("NVIDIA H200", major, []).text
    # across GPU models the clause follows the models, as on each model's own headline
    both = [*runs[:3], *[dataclasses.replace(r, gpu="NVIDIA H100") for r in runs[:3]]]
    both += [run("2.12.0+cpu", BAD), run("2.12.0+cpu", BAD, gpu="NVIDIA H100")]
    said = build_view(both, [], generated=NOW).comparison.headline
    assert said.startswith(
        "2.9.0 – 2.12.0 affected on each of 2 GPU models measured (NVIDIA H100, NVIDIA H200), "
        "not measured between 2.9.1 and 2.12.0 ("
    ), said


def test_an_edge_between_verdicts_of_two_probe_versions_is_not_claimed():
    """A script was edited and only 2.8.0 re-run: "fixed in 2.8.0" compared the new file's
    answer with the old file's, and the published script never ran 2.5.0 – 2.7.0."""
    from torchbisect.page.advice import fix_line

    def probed(version, outcome, probe):
        return dataclasses.replace(run(f"{version}+cu126", outcome), probe_version=probe)

    old = [probed(v, BAD, "0+1e585a3a9080") for v in ("2.5.0", "2.6.0", "2.7.0")]
    headline = build_headline("H200", [*old, probed("2.8.0", GOOD, "0+594aa95850d4")], [])
    assert headline.fixed == "" and headline.course.later_good == "2.8.0"
    assert fix_line(headline) == (
        "2.8.0 was measured not affected, but by another version of the probe file than 2.7.0: "
        "no fix is claimed"
    )
    same = build_headline("H200", [*old, probed("2.8.0", GOOD, "0+1e585a3a9080")], [])
    assert same.fixed == "2.8.0"
    stale = dataclasses.replace(run("2.7.0+cu124", BAD), probe_version="0+0ld0ld0ld0ld")
    other_tag = build_headline("H200", [*old, stale, probed("2.8.0", GOOD, "0+1e585a3a9080")], [])
    assert "another version of the probe file" not in fix_line(other_tag)  # cu124 is "never on"
    began = [probed("2.4.0", GOOD, "0+aaaa"), *old]
    assert build_headline("H200", began, []).untested == (
        "since 2.5.0 at the latest: 2.4.0 was measured not affected by another version of the "
        "probe file"
    )
    began[0] = probed("2.4.0", GOOD, "0+1e585a3a9080")
    assert build_headline("H200", began, []).course.exact
    # a probe that declares PROBE_VERSION says by it what its verdicts mean: an edit that
    # keeps it (a comment, a docstring) asks the same question
    declared = [probed(v, BAD, "3+36d98abe4fe9") for v in ("2.6.0", "2.7.0")]
    assert build_headline("H200", [*declared, probed("2.8.0", GOOD, "3+9926c683bf71")], []).fixed
    bumped = build_headline("H200", [*declared, probed("2.8.0", GOOD, "4+9926c683bf71")], [])
    assert bumped.fixed == ""
