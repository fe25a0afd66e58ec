//! Human drill reports: a self-contained HTML page and a Markdown summary, written beside each signed report.
//!
//! The HTML page puts the verdict first, then a per-item table (table, snapshot, objects, bytes, RTO, RPO,
//! history age, findings) and two inline SVG charts of the largest RTO and RPO of every report in the plan's
//! report chain (a third of the largest history age when quarantine reports measured one) (the `*.dsse.json` files of the plan's reports folder, oldest first). It is one file: styles are
//! inline, there is no script and nothing is fetched, so it opens from a ticket attachment, an air-gapped
//! share or a mail client. Every string that comes from a report (paths, ids, finding texts) is escaped.
//! The Markdown summary is the verdict, the totals and the failed items, for pasting into a ticket. Both name
//! the policy digest of every drilled table that a plan's `policies` bound (`results[].policy_digest`).
//!
//! What it does not do: verify anything. These pages are renderings for people; the signed envelope is
//! the evidence, and `lakedrill audit verify --chain` is what checks the chain the charts are drawn from
//! (a report in the folder that does not parse as a drill report is left out of the charts, not trusted).

use std::fmt::Write as _;

use serde::Serialize;

use crate::evidence::predicate::{DrillPredicate, DrillResult, PREDICATE_TYPE, RestoreStatus};

/// One report of the chain, as the trend charts show it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrendPoint {
    /// Report file name.
    pub report: String,
    /// `finished_at` of the report.
    pub finished_at: String,
    /// `PASS` or `FAIL`.
    pub gate: String,
    /// Largest RTO of the report's items, seconds.
    pub rto_max: f64,
    /// Largest RPO of the report's items, seconds (none when no item verified).
    pub rpo_max: Option<f64>,
    /// Quarantine drills: the largest history age of the report's items, seconds (none when none was measured).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history_age_max: Option<f64>,
}

impl TrendPoint {
    /// The point for one report.
    #[must_use]
    pub fn of(report: &str, p: &DrillPredicate) -> Self {
        Self {
            report: report.to_owned(),
            finished_at: p.finished_at.clone(),
            gate: p.summary.gate.clone(),
            rto_max: p.results.iter().map(|r| r.rto_seconds).fold(0.0, f64::max),
            rpo_max: p.results.iter().filter_map(|r| r.rpo_seconds).reduce(f64::max),
            history_age_max: p.results.iter().filter_map(|r| r.history_age_seconds).reduce(f64::max),
        }
    }
}

/// Where the human reports of one drill were written.
#[derive(Debug, Clone, Serialize)]
pub struct HumanReports {
    /// The HTML page.
    pub html_report: String,
    /// The Markdown summary.
    pub markdown_report: String,
    /// The chain the charts were drawn from, oldest first.
    pub trend: Vec<TrendPoint>,
}

/// The predicate of a drill report envelope, read without verifying it (for display only).
#[must_use]
pub fn read_predicate(envelope: &[u8]) -> Option<DrillPredicate> {
    let st = crate::evidence::peek_unverified(envelope)?;
    if st.get("predicateType")?.as_str()? != PREDICATE_TYPE {
        return None;
    }
    serde_json::from_value(st.get("predicate")?.clone()).ok()
}

/// Escapes text for HTML element content and attribute values.
#[must_use]
pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// Escapes text for a Markdown table cell or line: HTML-significant characters, pipes, backticks and
/// emphasis markers cannot change the layout or smuggle markup into a ticket.
fn md_escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '|' | '`' | '*' | '_' | '[' | ']' | '\\' | '#' => {
                o.push('\\');
                o.push(c);
            }
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '&' => o.push_str("&amp;"),
            '\n' | '\r' => o.push(' '),
            c => o.push(c),
        }
    }
    o
}

fn verified(r: &DrillResult) -> bool {
    r.status == RestoreStatus::RestoreVerified
}

fn finding_text(f: &crate::model::findings::Finding) -> String {
    f.to_string()
}

const STYLE: &str = "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2rem;color:#1b1f24;max-width:80rem}\
h1{font-size:1.4rem;margin:0 0 .5rem}h2{font-size:1.1rem;margin-top:2rem}\
.verdict{padding:1rem 1.25rem;border-radius:.5rem;font-size:1.3rem;font-weight:600;margin:1rem 0}\
.pass{background:#dafbe1;border:2px solid #1a7f37;color:#0f5323}.fail{background:#ffebe9;border:2px solid #cf222e;color:#82071e}\
table{border-collapse:collapse;width:100%;font-size:.9rem}th,td{border:1px solid #d0d7de;padding:.3rem .5rem;text-align:left;vertical-align:top}\
th{background:#f6f8fa}td.num{text-align:right;font-variant-numeric:tabular-nums}tr.failed{background:#fff5f5}\
code{font-size:.85em;word-break:break-all}dl{display:grid;grid-template-columns:max-content auto;gap:.2rem 1rem;font-size:.9rem}\
dt{font-weight:600}dd{margin:0}ul.findings{margin:0;padding-left:1.1rem}.charts{display:flex;flex-wrap:wrap;gap:2rem}\
td.findings{width:40%;overflow-wrap:anywhere;font-size:.8rem}tr.failed td.status{color:#cf222e;font-weight:600}td code{word-break:normal;overflow-wrap:anywhere}";

/// The self-contained HTML page of one drill report.
#[must_use]
#[allow(clippy::too_many_lines)]
pub fn render_html(p: &DrillPredicate, report: &str, trend: &[TrendPoint]) -> String {
    let pass = p.summary.gate == "PASS";
    let mut s = String::new();
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>lakedrill drill {plan}: {gate}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n",
        plan = escape(&p.drill.plan),
        gate = escape(&p.summary.gate),
    );
    let _ = writeln!(
        s,
        "<h1>Restore drill <code>{}</code> ({})</h1>",
        escape(&p.drill.plan),
        escape(&p.drill.kind)
    );
    let _ = writeln!(
        s,
        "<div id=\"verdict\" class=\"verdict {cls}\">Gate {gate}: {passed} of {size} sampled items restored and verified, {failed} failed.{advice}</div>",
        cls = if pass { "pass" } else { "fail" },
        gate = escape(&p.summary.gate),
        passed = p.summary.passed,
        failed = p.summary.failed,
        size = p.results.len(),
        advice = if pass {
            ""
        } else {
            " Do not delete: the deleter refuses this evidence."
        },
    );
    s.push_str("<dl>\n");
    let rows: [(&str, String); 9] = [
        ("signed report", report.to_owned()),
        ("drill id", p.drill.id.clone()),
        ("started", p.started_at.clone()),
        ("finished", p.finished_at.clone()),
        (
            "sample",
            format!(
                "seed {}, {} of {} eligible",
                p.sample.seed, p.sample.size, p.sample.population
            ),
        ),
        ("plan sha256", p.drill.plan_digest.clone()),
        (
            "policy sha256",
            p.drill.policy_digest.clone().unwrap_or_else(|| "-".into()),
        ),
        ("implementation sha256", p.drill.implementation_digest.clone()),
        (
            "previous report sha256",
            p.previous_report
                .clone()
                .unwrap_or_else(|| "none (first report of the chain)".into()),
        ),
    ];
    for (k, v) in rows {
        let _ = writeln!(s, "<dt>{}</dt><dd><code>{}</code></dd>", escape(k), escape(&v));
    }
    s.push_str("</dl>\n<h2>Items</h2>\n<table id=\"items\">\n<thead><tr><th>status</th><th>table</th><th>snapshot</th><th>bundle</th>\
                <th>objects</th><th>bytes</th><th>RTO (s)</th><th>RPO (s)</th><th>history age (s)</th><th>findings</th></tr></thead>\n<tbody>\n");
    for r in &p.results {
        let ok = verified(r);
        let _ = write!(
            s,
            "<tr class=\"{cls}\"><td class=\"status\">{status}</td><td><code>{table}</code></td><td><code>{snap}</code></td><td><code>{bundle}</code></td>\
             <td class=\"num\">{objects}</td><td class=\"num\">{bytes}</td><td class=\"num\">{rto:.3}</td><td class=\"num\">{rpo}</td><td class=\"num\" title=\"{age_basis}\">{age}</td><td class=\"findings\">",
            cls = if ok { "verified" } else { "failed" },
            status = if ok { "RESTORE_VERIFIED" } else { "FAILED" },
            table = escape(r.table_uuid.as_deref().unwrap_or("-")),
            snap = r.snapshot_id.map_or_else(|| "-".into(), |v| v.to_string()),
            bundle = escape(&r.bundle_id),
            objects = r.objects_verified,
            bytes = r.bytes_verified,
            rto = r.rto_seconds,
            rpo = r.rpo_seconds.map_or_else(|| "-".into(), |v| format!("{v:.3}")),
            age = r.history_age_seconds.map_or_else(|| "-".into(), |v| format!("{v:.3}")),
            age_basis = escape(r.history_age_basis.as_deref().unwrap_or_default()),
        );
        if r.findings.is_empty() {
            s.push_str("none");
        } else {
            s.push_str("<ul class=\"findings\">");
            for f in &r.findings {
                let _ = write!(s, "<li>{}</li>", escape(&finding_text(f)));
            }
            s.push_str("</ul>");
        }
        s.push_str("</td></tr>\n");
    }
    if p.results.is_empty() {
        s.push_str("<tr><td colspan=\"10\">no items</td></tr>\n");
    }
    s.push_str("</tbody>\n</table>\n");
    let policies = table_policies(p);
    if !policies.is_empty() {
        s.push_str("<h2>Policies</h2>\n<table id=\"policies\">\n<thead><tr><th>table</th><th>policy sha256</th></tr></thead>\n<tbody>\n");
        for (table, digest) in &policies {
            let _ = writeln!(
                s,
                "<tr><td><code>{}</code></td><td><code>{}</code></td></tr>",
                escape(table),
                escape(digest)
            );
        }
        s.push_str("</tbody>\n</table>\n");
    }
    let _ = writeln!(
        s,
        "<h2>Trend across the report chain ({} report{})</h2>\n<div class=\"charts\">",
        trend.len(),
        if trend.len() == 1 { "" } else { "s" }
    );
    let rto: Vec<(String, Option<f64>, bool)> = trend
        .iter()
        .map(|t| (t.finished_at.clone(), Some(t.rto_max), t.gate == "PASS"))
        .collect();
    let rpo: Vec<(String, Option<f64>, bool)> = trend
        .iter()
        .map(|t| (t.finished_at.clone(), t.rpo_max, t.gate == "PASS"))
        .collect();
    s.push_str(&svg_chart("rto-chart", "Largest RTO per drill (seconds)", &rto));
    s.push_str(&svg_chart("rpo-chart", "Largest RPO per drill (seconds)", &rpo));
    // Quarantine drills have no RPO; how much history their bundles preserve is charted instead.
    if trend.iter().any(|t| t.history_age_max.is_some()) {
        let age: Vec<(String, Option<f64>, bool)> = trend
            .iter()
            .map(|t| (t.finished_at.clone(), t.history_age_max, t.gate == "PASS"))
            .collect();
        s.push_str(&svg_chart(
            "history-age-chart",
            "Largest history age per drill (seconds behind the live head)",
            &age,
        ));
    }
    s.push_str("</div>\n<p>Charts are drawn from the reports in the plan's reports folder, oldest on the left; \
                <code>lakedrill audit verify REPORT --trust KEYS --chain</code> verifies them. A run whose gate failed is a red point.</p>\n</body>\n</html>\n");
    s
}

/// One line chart as inline SVG: x = report order, y = value; red points for failed gates.
#[allow(clippy::cast_precision_loss)]
fn svg_chart(id: &str, title: &str, points: &[(String, Option<f64>, bool)]) -> String {
    const W: f64 = 520.0;
    const H: f64 = 240.0;
    const L: f64 = 60.0;
    const R: f64 = 20.0;
    const T: f64 = 30.0;
    const B: f64 = 40.0;
    let (max, decimals) = nice_axis(points.iter().filter_map(|p| p.1).fold(0.0_f64, f64::max));
    let n = points.len();
    let x = |i: usize| {
        if n <= 1 {
            L + (W - L - R) / 2.0
        } else {
            L + (W - L - R) * i as f64 / (n - 1) as f64
        }
    };
    let y = |v: f64| T + (H - T - B) * (1.0 - v / max);
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg id=\"{id}\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" viewBox=\"0 0 {W} {H}\" role=\"img\" aria-label=\"{t}\">\
         <title>{t}</title><rect x=\"0\" y=\"0\" width=\"{W}\" height=\"{H}\" fill=\"#ffffff\" stroke=\"#d0d7de\"/>\
         <text x=\"{L}\" y=\"18\" font-size=\"13\" font-family=\"sans-serif\">{t}</text>\
         <line x1=\"{L}\" y1=\"{y0}\" x2=\"{xr}\" y2=\"{y0}\" stroke=\"#57606a\"/><line x1=\"{L}\" y1=\"{T}\" x2=\"{L}\" y2=\"{y0}\" stroke=\"#57606a\"/>",
        id = escape(id),
        t = escape(title),
        y0 = H - B,
        xr = W - R,
    );
    for k in 0..=4 {
        let v = max * f64::from(k) / 4.0;
        let _ = write!(
            s,
            "<text x=\"{tx}\" y=\"{ty:.1}\" font-size=\"10\" text-anchor=\"end\" font-family=\"sans-serif\">{v:.decimals$}</text>\
             <line x1=\"{L}\" y1=\"{ty0:.1}\" x2=\"{xr}\" y2=\"{ty0:.1}\" stroke=\"#eaeef2\"/>",
            tx = L - 6.0,
            ty = y(v) + 3.0,
            ty0 = y(v),
            xr = W - R,
        );
    }
    let line: Vec<String> = points
        .iter()
        .enumerate()
        .filter_map(|(i, p)| p.1.map(|v| format!("{:.1},{:.1}", x(i), y(v))))
        .collect();
    if line.len() > 1 {
        let _ = write!(
            s,
            "<polyline fill=\"none\" stroke=\"#0969da\" stroke-width=\"2\" points=\"{}\"/>",
            line.join(" ")
        );
    }
    for (i, (label, v, ok)) in points.iter().enumerate() {
        if let Some(v) = v {
            let _ = write!(
                s,
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"4\" fill=\"{}\"><title>{}: {v:.3} s</title></circle>",
                x(i),
                y(*v),
                if *ok { "#0969da" } else { "#cf222e" },
                escape(label)
            );
        }
    }
    if let (Some(first), Some(last)) = (points.first(), points.last()) {
        let _ = write!(
            s,
            "<text x=\"{L}\" y=\"{ly}\" font-size=\"10\" font-family=\"sans-serif\">{}</text>\
             <text x=\"{xr}\" y=\"{ly}\" font-size=\"10\" text-anchor=\"end\" font-family=\"sans-serif\">{}</text>",
            escape(first.0.get(..16).unwrap_or(&first.0)),
            escape(last.0.get(..16).unwrap_or(&last.0)),
            ly = H - B + 16.0,
            xr = W - R,
        );
    }
    s.push_str("</svg>\n");
    s
}

/// A "nice" axis maximum (1, 2 or 5 times a power of ten, at least the data maximum) and the decimals
/// its quarter steps need.
fn nice_axis(max: f64) -> (f64, usize) {
    if !max.is_finite() || max <= 0.0 {
        return (1.0, 2);
    }
    let exp = max.log10().floor();
    let base = 10f64.powf(exp);
    let top = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * base)
        .find(|t| *t >= max)
        .unwrap_or(10.0 * base);
    let step = top / 4.0;
    let decimals = (0..=6)
        .find(|d| {
            let scaled = step * 10f64.powi(*d);
            (scaled - scaled.round()).abs() < 1e-6 * scaled.max(1.0)
        })
        .and_then(|d| usize::try_from(d).ok())
        .unwrap_or(6);
    (top, decimals)
}

/// The Markdown summary of one drill report, for tickets.
#[must_use]
pub fn render_markdown(p: &DrillPredicate, report: &str, html: &str) -> String {
    let mut s = String::new();
    let pass = p.summary.gate == "PASS";
    let _ = writeln!(
        s,
        "## Restore drill `{}`: gate **{}**\n",
        p.drill.plan.replace('`', "'"),
        md_escape(&p.summary.gate)
    );
    let _ = writeln!(
        s,
        "{} of {} sampled items restored and verified, {} failed{}.\n",
        p.summary.passed,
        p.results.len(),
        p.summary.failed,
        if pass { "" } else { " — **do not delete**" }
    );
    let rto = p.results.iter().map(|r| r.rto_seconds).fold(0.0, f64::max);
    let rpo = p.results.iter().filter_map(|r| r.rpo_seconds).reduce(f64::max);
    let bytes: u64 = p.results.iter().map(|r| r.bytes_verified).sum();
    let _ = writeln!(s, "| | |\n| --- | --- |");
    for (k, v) in [
        ("finished", p.finished_at.clone()),
        (
            "sample",
            format!(
                "seed {}, {} of {} eligible",
                p.sample.seed, p.sample.size, p.sample.population
            ),
        ),
        ("max RTO", format!("{rto:.3} s")),
        ("max RPO", rpo.map_or_else(|| "-".into(), |v| format!("{v:.3} s"))),
        (
            "max history age",
            p.results
                .iter()
                .filter_map(|r| r.history_age_seconds)
                .reduce(f64::max)
                .map_or_else(|| "-".into(), |v| format!("{v:.3} s behind the live head")),
        ),
        ("bytes verified", bytes.to_string()),
        ("signed report", report.to_owned()),
        ("HTML report", html.to_owned()),
    ] {
        let _ = writeln!(s, "| {k} | {} |", md_escape(&v));
    }
    let failed: Vec<&DrillResult> = p.results.iter().filter(|r| !verified(r)).collect();
    if !failed.is_empty() {
        let _ = writeln!(s, "\n### Failed items\n");
        let _ = writeln!(s, "| bundle | snapshot | findings |\n| --- | --- | --- |");
        for r in failed {
            let f: Vec<String> = r.findings.iter().map(|f| md_escape(&finding_text(f))).collect();
            let _ = writeln!(
                s,
                "| {} | {} | {} |",
                md_escape(&r.bundle_id),
                r.snapshot_id.map_or_else(|| "-".into(), |v| v.to_string()),
                if f.is_empty() { "-".into() } else { f.join("<br>") }
            );
        }
    }
    let policies = table_policies(p);
    if !policies.is_empty() {
        let _ = writeln!(s, "\n### Policies\n");
        let _ = writeln!(s, "| table | policy sha256 |\n| --- | --- |");
        for (table, digest) in &policies {
            let _ = writeln!(s, "| {} | {} |", md_escape(table), md_escape(digest));
        }
    }
    let _ = writeln!(
        s,
        "\nVerify: `lakedrill audit verify {} --trust KEYS --chain`",
        report.replace('`', "'")
    );
    s
}

/// The policy digest of each drilled table that names one (`results[].policy_digest`), by table UUID.
fn table_policies(p: &DrillPredicate) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = p
        .results
        .iter()
        .filter_map(|r| {
            let digest = r.policy_digest.clone()?;
            Some((r.table_uuid.clone().unwrap_or_else(|| "-".into()), digest))
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::predicate::{DrillInfo, SampleInfo, Summary};
    use crate::model::findings::{Finding, FindingKind};

    fn predicate(gate: &str) -> DrillPredicate {
        DrillPredicate {
            drill: DrillInfo {
                id: "id".into(),
                kind: "quarantine".into(),
                plan: "p<script>".into(),
                plan_digest: "d".into(),
                policy_digest: None,
                implementation_digest: "i".into(),
                evidence_retention: None,
                parallel_bundles: None,
            },
            started_at: "2026-01-01T00:00:00.000Z".into(),
            finished_at: "2026-01-01T00:00:01.000Z".into(),
            sample: SampleInfo {
                seed: 1,
                population: 2,
                size: 1,
                selected: vec!["b".into()],
                retired: 0,
                source: None,
                population_ids: vec![],
                population_roots: Vec::new(),
                sampler: None,
                coverage_weeks: None,
                coverage: vec![],
                forced: vec![],
            },
            results: vec![DrillResult {
                table_uuid: Some("u".into()),
                snapshot_id: Some(7),
                objects_verified: 3,
                bytes_verified: 10,
                rto_seconds: 1.5,
                findings: vec![Finding::new(
                    FindingKind::DigestMismatch,
                    "data/<b>|x.parquet",
                    Some("a".into()),
                    Some("b".into()),
                )],
                history_age_basis: Some("not measured: the item did not verify".into()),
                ..DrillResult::new("b\"><img src=x>", RestoreStatus::Failed)
            }],
            summary: Summary {
                passed: 0,
                failed: 1,
                gate: gate.into(),
            },
            previous_report: None,
            shard: None,
            merged_from: None,
        }
    }

    #[test]
    fn html_escapes_every_report_string_and_has_no_external_reference() {
        let p = predicate("FAIL");
        let h = render_html(&p, "file:///r/x.dsse.json", &[TrendPoint::of("x", &p)]);
        assert!(!h.contains("<script"), "{h}");
        assert!(!h.contains("<img"), "{h}");
        assert!(h.contains("p&lt;script&gt;"));
        assert!(h.contains("data/&lt;b&gt;|x.parquet"));
        assert!(
            !h.contains("http://") || h.matches("http://").count() == h.matches("http://www.w3.org/2000/svg").count()
        );
        assert!(!h.contains("https://"));
        assert!(h.contains("<svg id=\"rto-chart\"") && h.contains("<svg id=\"rpo-chart\""));
        assert!(h.find("id=\"verdict\"") < h.find("id=\"items\""), "verdict first");
    }

    #[test]
    fn axis_maxima_are_round_and_cover_the_data() {
        assert_eq!(nice_axis(0.0), (1.0, 2));
        assert!((nice_axis(0.018).0 - 0.02).abs() < 1e-12);
        assert_eq!(nice_axis(3.2), (5.0, 2));
        assert_eq!(nice_axis(40.0), (50.0, 1));
        assert_eq!(nice_axis(100.0), (100.0, 0));
    }

    #[test]
    fn both_renderings_name_each_tables_policy_digest() {
        let mut p = predicate("FAIL");
        assert!(!render_html(&p, "r", &[]).contains("id=\"policies\""));
        assert!(!render_markdown(&p, "r", "h").contains("### Policies"));
        let mut second = p.results[0].clone();
        second.table_uuid = Some("v".into());
        second.policy_digest = Some("e".repeat(64));
        p.results[0].policy_digest = Some("d".repeat(64));
        p.results.push(second);
        let h = render_html(&p, "r", &[]);
        assert!(
            h.contains(&format!(
                "<tr><td><code>u</code></td><td><code>{}</code></td></tr>",
                "d".repeat(64)
            )),
            "{h}"
        );
        assert!(
            h.contains(&format!(
                "<tr><td><code>v</code></td><td><code>{}</code></td></tr>",
                "e".repeat(64)
            )),
            "{h}"
        );
        let m = render_markdown(&p, "r", "h");
        assert!(m.contains(&format!("| u | {} |", "d".repeat(64))), "{m}");
        assert!(m.contains(&format!("| v | {} |", "e".repeat(64))), "{m}");
    }

    #[test]
    fn markdown_escapes_table_breaking_characters() {
        let p = predicate("FAIL");
        let m = render_markdown(&p, "r", "h");
        assert!(m.contains("data/&lt;b&gt;\\|x.parquet"), "{m}");
        assert!(m.contains("**do not delete**"));
    }
}
