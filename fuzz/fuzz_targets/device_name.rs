//! `str::parse::<accelkit::Device>()` on arbitrary strings: never panics, and every accepted
//! name prints (Display) as a name that parses back to the same device.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Raw bytes as (lossy) UTF-8, so the fuzzer can reach multi-byte characters too.
    let s = String::from_utf8_lossy(data);
    check(&s);
    // The common shapes with a fuzzed suffix, so the index parser is reached often.
    for prefix in ["cuda:", "xla:", "wgpu:", "cpu:", "mps:", "xla:cpu:"] {
        check(&format!("{prefix}{s}"));
    }
});

fn check(s: &str) {
    let Ok(d) = s.parse::<accelkit::Device>() else {
        return;
    };
    let shown = d.to_string();
    let back: accelkit::Device = shown
        .parse()
        .unwrap_or_else(|e| panic!("{s:?} parsed as {d:?}, displayed as {shown:?}, which does not parse: {e}"));
    assert_eq!(back, d, "{s:?} -> {d:?} -> {shown:?} -> {back:?}");
    // Display is canonical: printing again gives the same text.
    assert_eq!(back.to_string(), shown);
    // The accessors agree with the variant and never panic.
    assert_eq!(d.kind(), shown.split(':').next().unwrap());
    let _ = d.index();
}
