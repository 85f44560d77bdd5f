//! The Apple reader's parsing, on recorded `PerformanceStatistics` dictionaries (see
//! tests/fixtures/telemetry/apple/README.md for where they come from). Runs on every platform;
//! the IOKit call itself exists only on macOS.

use std::collections::BTreeMap;
use std::path::Path;

use crate::apple::{parse_ioreg_dictionary, reading_from_statistics, AppleReader, PlistValue};
use crate::{Reader, Roots, Vendor};

/// The `PerformanceStatistics` dictionary of a recorded ioreg output.
fn recorded(file: &str) -> BTreeMap<String, PlistValue> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/telemetry/apple")
        .join(file);
    let text = std::fs::read_to_string(&path).expect("fixture");
    let line = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("\"PerformanceStatistics\" = "))
        .expect("a PerformanceStatistics line");
    parse_ioreg_dictionary(line).expect("parses")
}

#[test]
fn apple_silicon_m1_pro_max() {
    let stats = recorded("m1-pro-max.ioreg.txt");
    assert_eq!(stats.len(), 9);
    assert_eq!(
        stats.get("Renderer Utilization %"),
        Some(&PlistValue::Int(2))
    );
    let r = reading_from_statistics(0, "Apple M1 Max", &stats);
    assert_eq!(r.vendor, Vendor::Apple);
    assert_eq!(r.id(), "apple:0");
    assert_eq!(r.name, "Apple M1 Max");
    assert_eq!(r.status, None);
    // "Device Utilization %"=2
    assert_eq!(r.utilization_percent, Some(2.0));
    // "In use system memory"=340983808 of "Alloc system memory"=1214005248.
    assert_eq!(r.memory_used_bytes, Some(340_983_808));
    assert_eq!(r.memory_total_bytes, Some(1_214_005_248));
    assert_eq!(r.memory_free_bytes(), Some(1_214_005_248 - 340_983_808));
    assert_eq!(r.gtt_used_bytes, None);
    assert_eq!(r.temperature_c, None);
    assert_eq!(r.power_w, None);
}

#[test]
fn intel_mac_gpu() {
    let stats = recorded("intel-mac.ioreg.txt");
    assert_eq!(stats.len(), 46);
    let r = reading_from_statistics(1, "Intel GPU", &stats);
    assert_eq!(r.id(), "apple:1");
    assert_eq!(r.status, None);
    assert_eq!(r.utilization_percent, Some(0.0));
    // No "In use system memory" nor VRAM keys: an integrated GPU without dedicated memory.
    assert_eq!(r.memory_used_bytes, None);
    assert_eq!(r.memory_total_bytes, None);
    // GART: 33,492,992 used + 7,482,699,776 free = 7,516,192,768 = exactly 7 GiB.
    assert_eq!(r.gtt_used_bytes, Some(33_492_992));
    assert_eq!(r.gtt_total_bytes, Some(7 << 30));
}

#[test]
fn odd_values() {
    let mut stats = BTreeMap::new();
    // Intel's driver has reported 308 (exelban/stats#649).
    stats.insert("Device Utilization %".to_string(), PlistValue::Int(308));
    stats.insert("vramUsedBytes".to_string(), PlistValue::Int(1 << 30));
    stats.insert("vramFreeBytes".to_string(), PlistValue::Int(3 << 30));
    stats.insert("Temperature(C)".to_string(), PlistValue::Float(65.5));
    stats.insert("Total Power(W)".to_string(), PlistValue::Int(15));
    stats.insert("gartUsedBytes".to_string(), PlistValue::Int(-5));
    let r = reading_from_statistics(0, "AMD Radeon Pro 5700 XT", &stats);
    assert_eq!(r.utilization_percent, Some(100.0));
    assert_eq!(r.memory_used_bytes, Some(1 << 30));
    assert_eq!(r.memory_total_bytes, Some(4 << 30));
    assert_eq!(r.temperature_c, Some(65.5));
    assert_eq!(r.power_w, Some(15.0));
    assert_eq!(r.gtt_used_bytes, None, "a negative byte count is no count");

    // Nothing known: the status says why there is no utilization.
    let r = reading_from_statistics(0, "Apple GPU", &BTreeMap::new());
    assert_eq!(r.utilization_percent, None);
    assert!(r
        .status
        .as_deref()
        .unwrap_or("")
        .contains("Device Utilization %"));
    let mut nan = BTreeMap::new();
    nan.insert(
        "Device Utilization %".to_string(),
        PlistValue::Float(f64::NAN),
    );
    nan.insert(
        "In use system memory".to_string(),
        PlistValue::Str("x".into()),
    );
    let r = reading_from_statistics(0, "Apple GPU", &nan);
    assert_eq!(r.utilization_percent, None);
    assert_eq!(r.memory_used_bytes, None);
}

#[test]
fn ioreg_dictionary_notation() {
    let d = parse_ioreg_dictionary(
        r#"{"a"=1,"b"=-2.5,"c"=Yes,"d"=No,"e"="x \"y\"","f"={"g"=3},"h"=(1,"(",{"i"=2}),"j"=<6b10>,"k"={}}"#,
    )
    .expect("parses");
    assert_eq!(d.get("a"), Some(&PlistValue::Int(1)));
    assert_eq!(d.get("b"), Some(&PlistValue::Float(-2.5)));
    assert_eq!(d.get("c"), Some(&PlistValue::Bool(true)));
    assert_eq!(d.get("d"), Some(&PlistValue::Bool(false)));
    assert_eq!(d.get("e"), Some(&PlistValue::Str("x \"y\"".into())));
    let mut g = BTreeMap::new();
    g.insert("g".to_string(), PlistValue::Int(3));
    assert_eq!(d.get("f"), Some(&PlistValue::Dict(g)));
    assert_eq!(d.get("h"), None, "arrays are skipped");
    assert_eq!(d.get("j"), None, "data is skipped");
    assert_eq!(d.get("k"), Some(&PlistValue::Dict(BTreeMap::new())));
    assert_eq!(parse_ioreg_dictionary("{}"), Some(BTreeMap::new()));
    for bad in [
        "",
        "{",
        "{\"a\"}",
        "{\"a\"=}",
        "{\"a\"=1,}",
        "{\"a\"=1",
        "{\"a\"=1}}",
        "{a=1}",
        "{\"a\"=zz}",
        "{\"a\"=(1,2}",
        "{\"a\"=\"unterminated}",
    ] {
        assert_eq!(parse_ioreg_dictionary(bad), None, "{bad:?}");
    }
    // Deep nesting is refused, not a stack overflow.
    let deep = "{\"a\"=".repeat(10_000) + &"}".repeat(10_000);
    assert_eq!(parse_ioreg_dictionary(&deep), None);
    let deep = format!("{{\"a\"={}}}", "(".repeat(10_000));
    assert_eq!(parse_ioreg_dictionary(&deep), None);
}

#[test]
fn reader_off_macos_has_no_devices() {
    let mut r = AppleReader::new();
    assert_eq!(r.vendor(), Vendor::Apple);
    let got = r.read(&Roots::default()).expect("never fails off macOS");
    if !cfg!(target_os = "macos") {
        assert!(got.is_empty());
    }
}
