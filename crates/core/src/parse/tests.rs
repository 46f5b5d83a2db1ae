use std::borrow::Cow;

use super::*;

fn ok(body: &str) -> Exposition<'_> {
    parse(body.as_bytes(), &Limits::default()).unwrap_or_else(|e| panic!("{e}"))
}

fn err(body: &str) -> ParseError {
    parse(body.as_bytes(), &Limits::default()).expect_err("should be rejected")
}

#[test]
fn colon_names_and_families() {
    let body = "# HELP vllm:num_requests_running Number of requests.\n\
                # TYPE vllm:num_requests_running gauge\n\
                vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 3.0\n";
    let e = ok(body);
    assert_eq!(e.families.len(), 1);
    assert_eq!(e.families[0].kind, MetricType::Gauge);
    assert_eq!(e.families[0].help.as_deref(), Some("Number of requests."));
    assert_eq!(e.samples[0].name, "vllm:num_requests_running");
    assert_eq!(e.samples[0].value, 3.0);
    assert_eq!(e.label(&e.samples[0], "model_name"), Some("m"));
}

#[test]
fn label_escapes_and_odd_characters() {
    let e = ok(r#"m{a="x\\y",b="say \"hi\"",c="l1\nl2",d="a,b=c{d}e"} 1"#);
    let s = &e.samples[0];
    assert_eq!(e.label(s, "a"), Some(r"x\y"));
    assert_eq!(e.label(s, "b"), Some(r#"say "hi""#));
    assert_eq!(e.label(s, "c"), Some("l1\nl2"));
    assert_eq!(e.label(s, "d"), Some("a,b=c{d}e"));
}

#[test]
fn values_and_timestamps() {
    let e = ok(
        "a NaN\nb +Inf\nc -Inf\nd 1.5e+03\ne 0.00015000000000000001\nf 7 1700000000000\ng 2 # {trace_id=\"x\"} 1.0 1.5\n",
    );
    assert!(e.samples[0].value.is_nan());
    assert_eq!(e.samples[1].value, f64::INFINITY);
    assert_eq!(e.samples[2].value, f64::NEG_INFINITY);
    assert_eq!(e.samples[3].value, 1500.0);
    assert_eq!(e.samples[4].value, 0.00015000000000000001);
    assert_eq!(e.samples[5].timestamp, Some(1.7e12));
    assert_eq!(e.samples[6].value, 2.0);
    assert_eq!(e.samples[6].timestamp, None);
}

#[test]
fn help_type_without_samples_crlf_no_trailing_newline_eof() {
    let e =
        ok("# HELP lm:x Esc \\\\ and \\n.\r\n# TYPE lm:x counter\r\n\r\n# TYPE t gauge\r\nt 1\r\n# EOF\r\nignored{ 1");
    assert_eq!(e.families.len(), 2);
    assert_eq!(e.families[0].help.as_deref(), Some("Esc \\ and \n."));
    assert_eq!(e.families[0].samples, 0);
    assert_eq!(e.samples.len(), 1);
    let e = ok("a 1\nb 2");
    assert_eq!(e.samples[1].value, 2.0);
}

#[test]
fn histogram_lines_in_any_order_and_total_suffix() {
    let body = "# TYPE vllm:iteration_tokens_total histogram\n\
        vllm:iteration_tokens_total_sum{engine=\"0\"} 10\n\
        vllm:iteration_tokens_total_bucket{le=\"+Inf\",engine=\"0\"} 3\n\
        vllm:iteration_tokens_total_count{engine=\"0\"} 3\n\
        vllm:iteration_tokens_total_bucket{engine=\"0\",le=\"1.0\"} 1\n\
        # HELP vllm:iteration_tokens_total_created x\n\
        # TYPE vllm:iteration_tokens_total_created gauge\n\
        vllm:iteration_tokens_total_created{engine=\"0\"} 1.7e9\n";
    let e = ok(body);
    assert_eq!(e.families.len(), 2);
    assert_eq!(e.families[0].kind, MetricType::Histogram);
    assert_eq!(e.families[0].samples, 4);
    assert_eq!(e.families[1].kind, MetricType::Gauge);
    assert!(e.samples[..4].iter().all(|s| s.family == 0));
    assert_eq!(e.samples[4].family, 1);
    assert_eq!(parse_f64(e.label(&e.samples[3], "le").unwrap()), Some(1.0));
}

#[test]
fn summaries_and_untyped() {
    let e = ok("# TYPE s summary\ns{quantile=\"0.5\"} 1\ns_sum 3\ns_count 2\nfree 4\n# TYPE u untyped\nu 1\n");
    assert_eq!(e.families[0].kind, MetricType::Summary);
    assert_eq!(e.families[0].samples, 3);
    assert_eq!(e.families[1].name, "free");
    assert_eq!(e.families[1].kind, MetricType::Untyped);
    assert_eq!(e.families[2].kind, MetricType::Untyped);
}

#[test]
fn samples_after_another_family_rejoin_theirs() {
    let e = ok("# TYPE h histogram\nh_bucket{le=\"1\"} 1\n# TYPE g gauge\ng 1\nh_count 1\n");
    assert_eq!(e.samples[2].family, 0);
    assert_eq!(e.families[0].samples, 2);
}

#[test]
fn duplicates_are_reported_and_first_wins() {
    let e = ok("a{x=\"1\",y=\"2\"} 1\na{y=\"2\",x=\"1\"} 2\na{x=\"2\",y=\"2\"} 3\n");
    assert_eq!(e.samples.len(), 2);
    assert_eq!(e.samples[0].value, 1.0);
    assert_eq!(e.duplicates.len(), 1);
    assert_eq!(e.duplicates[0].line, 2);
    assert_eq!(e.duplicates[0].first_line, 1);
}

#[test]
fn malformed_lines_give_line_and_reason() {
    let cases: &[(&str, usize, &str)] = &[
        ("ok 1\nbad{ 1\n", 2, "label"),
        ("ok 1\n\nx{a=\"1\" 1\n", 3, "expected ',' or '}'"),
        ("x 1 2 3\n", 1, "unexpected text"),
        ("x abc\n", 1, "invalid sample value"),
        ("x\n", 1, "no value"),
        ("9x 1\n", 1, "invalid metric name"),
        ("x{a=\"1\",a=\"2\"} 1\n", 1, "appears twice"),
        ("x{a=\"unterminated} 1\n", 1, "not closed"),
        ("# TYPE x flubber\n", 1, "unknown metric type"),
        ("x 1 notatime\n", 1, "invalid timestamp"),
        ("x-y 1\n", 1, "invalid metric name"),
    ];
    for (body, line, reason) in cases {
        let e = err(body);
        assert_eq!(e.line, *line, "{body:?}: {e}");
        assert!(e.to_string().contains(reason), "{body:?}: {e}");
    }
}

#[test]
fn limits_are_enforced() {
    let small = Limits { max_body_bytes: 10, ..Limits::default() };
    let e = parse(b"a_long_metric 1\n", &small).unwrap_err();
    assert_eq!(e.reason(), "body_too_large");
    let few = Limits { max_samples: 2, ..Limits::default() };
    let e = parse(b"a 1\nb 1\nc 1\n", &few).unwrap_err();
    assert_eq!((e.line, e.reason()), (3, "too_many_samples"));
    let short = Limits { max_label_value_bytes: 3, ..Limits::default() };
    let e = parse(b"a{x=\"abcd\"} 1\n", &short).unwrap_err();
    assert_eq!(e.reason(), "label_limit");
    let e = parse(b"ok 1\n\xff 1\n", &Limits::default()).unwrap_err();
    assert_eq!((e.line, e.kind.clone()), (2, ParseErrorKind::InvalidUtf8));
}

#[test]
fn le_and_quantile_compare_numerically_anywhere_in_the_label_set() {
    let e = ok("# TYPE h histogram\nh_bucket{le=\"2\",a=\"x\"} 1\nh_bucket{a=\"x\",le=\"2.0e0\",b=\"y\"} 1\n\
                h_bucket{a=\"x\",le=\"+Inf\"} 2\n# TYPE s summary\ns{quantile=\"0.50\"} 1\n");
    assert_eq!(e.label_f64(&e.samples[0], "le"), Some(2.0));
    assert_eq!(e.label_f64(&e.samples[1], "le"), Some(2.0));
    assert_eq!(e.label_f64(&e.samples[2], "le"), Some(f64::INFINITY));
    assert_eq!(e.label_f64(&e.samples[3], "quantile"), Some(0.5));
    assert_eq!(e.label_f64(&e.samples[3], "le"), None);
}

#[test]
fn leading_blanks_trailing_comma_and_blank_only_lines() {
    let e = ok("  a{x=\"1\",} 1 \n \t \n\t# TYPE b gauge\nb {} 2\n");
    assert_eq!(e.samples.len(), 2);
    assert_eq!(e.label(&e.samples[0], "x"), Some("1"));
    assert_eq!(e.samples[1].value, 2.0);
    assert_eq!(e.families[1].kind, MetricType::Gauge);
    assert_eq!(e.samples[1].line, 4);
}

#[test]
fn openmetrics_types_and_exemplars() {
    let body = "# TYPE c counter\n# UNIT c seconds\nc_total 3 # {id=\"a\"} 1 1.5\nc_created 1.7e9\n\
        # TYPE i info\ni_info{v=\"1\"} 1\n# TYPE gh gaugehistogram\ngh_bucket{le=\"+Inf\"} 1\ngh_gcount 1\ngh_gsum 2\n\
        # TYPE st stateset\nst{st=\"a\"} 1\n# EOF\n";
    let e = ok(body);
    let kinds: Vec<_> = e.families.iter().map(|f| (f.name, f.kind, f.samples)).collect();
    assert_eq!(
        kinds,
        vec![
            ("c", MetricType::Counter, 2),
            ("i", MetricType::Info, 1),
            ("gh", MetricType::GaugeHistogram, 3),
            ("st", MetricType::StateSet, 1),
        ]
    );
    assert_eq!(e.samples[0].value, 3.0);
}

#[test]
fn duplicates_count_against_the_sample_limit() {
    let few = Limits { max_samples: 3, ..Limits::default() };
    let e = parse(b"a 1\na 1\na 1\na 1\n", &few).unwrap_err();
    assert_eq!((e.line, e.reason()), (4, "too_many_samples"));
}

#[test]
fn error_lines_count_crlf_and_blank_lines() {
    let e = err("a 1\r\n\r\n# c\r\nb{x=\"1\"} oops\r\n");
    assert_eq!(e.line, 4);
    assert!(e.to_string().starts_with("line 4: invalid sample value \"oops\""), "{e}");
}

#[test]
fn fingerprint_collisions_are_told_apart_from_duplicates() {
    // Find two distinct series whose 32-bit fingerprints collide (birthday search).
    let mut by_fp: HashMap<u32, u32> = HashMap::new();
    let (a, b) = (0u32..1_000_000)
        .find_map(|i| {
            let v = i.to_string();
            let fp = (hash::series("m", &[Label { name: "i", value: Cow::Borrowed(&v) }]) >> 32) as u32;
            by_fp.insert(fp, i).map(|j| (j, i))
        })
        .expect("a 32-bit collision within a million series");
    let body = format!("m{{i=\"{a}\"}} 1\nm{{i=\"{b}\"}} 2\nm{{i=\"{b}\"}} 3\nm{{i=\"{a}\"}} 4\n");
    let e = ok(&body);
    assert_eq!(e.samples.iter().map(|s| s.value).collect::<Vec<_>>(), vec![1.0, 2.0]);
    let dups: Vec<_> = e.duplicates.iter().map(|d| (d.line, d.first_line)).collect();
    assert_eq!(dups, vec![(3, 2), (4, 1)]);
}

#[test]
fn name_cache_never_confuses_similar_names() {
    // Each line shares a prefix with the previous one but is a different name.
    let e = ok("abcdefghij_x{ab=\"1\"} 1\nabcdefghij_y{ab=\"1\",abc=\"2\"} 2\nabcdefghij_x_total{a=\"1\"} 3\n\
                abcdefghij{abc=\"1\"} 4\nabcdefghij_x{ab=\"1\"} 5\nabcdefghij_x:{ab=\"1\"} 6\n");
    let got: Vec<_> =
        e.samples.iter().map(|s| (s.name, e.labels_of(s).iter().map(|l| l.name).collect::<Vec<_>>())).collect();
    assert_eq!(
        got,
        vec![
            ("abcdefghij_x", vec!["ab"]),
            ("abcdefghij_y", vec!["ab", "abc"]),
            ("abcdefghij_x_total", vec!["a"]),
            ("abcdefghij", vec!["abc"]),
            ("abcdefghij_x:", vec!["ab"]),
        ]
    );
    assert_eq!(e.duplicates.len(), 1);
    assert_eq!((e.duplicates[0].line, e.duplicates[0].first_line), (5, 1));
}
