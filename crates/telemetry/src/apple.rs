//! Apple GPUs (and the GPUs of Intel Macs), from IOKit's registry: every GPU driver registers
//! an entry of class `IOAccelerator` (Apple silicon: `AGXAccelerator...`; Intel Macs:
//! `IntelAccelerator`, AMD's `AMDRadeon...`) whose property `PerformanceStatistics` is a
//! dictionary of live numbers, readable without root (what `ioreg -r -d 1 -w 0 -c
//! IOAccelerator` prints, and what Stats, asitop and nvtop read):
//!
//! * `Device Utilization %`: the GPU's busy percent (also `Renderer Utilization %` and `Tiler
//!   Utilization %`, the two halves of a tile-based GPU). Intel's driver has been seen to
//!   report more than 100 (exelban/stats#649): clamped to 0..=100 here.
//! * Apple silicon: `In use system memory` (bytes of unified memory the GPU uses now) and
//!   `Alloc system memory` (bytes the driver has allocated for it), shown as used / total.
//! * Intel and AMD GPUs of Intel Macs: `vramUsedBytes` / `vramFreeBytes` or
//!   `inUseVidMemoryBytes` (dedicated memory), `gartUsedBytes` / `gartFreeBytes` (system memory
//!   mapped for the GPU, shown as GTT), and on AMD `Temperature(C)` and `Total Power(W)`.
//!
//! The parsing is plain code, compiled and tested on every platform on recorded dictionaries
//! ([`reading_from_statistics`], [`parse_ioreg_dictionary`]). Only the registry walk is
//! macOS-only: raw FFI against IOKit and CoreFoundation, which is NOT compiled on the Linux
//! machines this crate is developed on (no macOS target there), so it is kept small and
//! written to the letter of Apple's headers; see the `macos` module's notes.
// The parsers run on macOS only (the reader), and in this crate's tests everywhere.
#![cfg_attr(not(target_os = "macos"), allow(dead_code))]

use std::collections::BTreeMap;

use super::reading::{Reader, Reading, Roots, Vendor};

/// A property-list value, as IOKit gives it (CFNumber, CFBoolean, CFString, CFDictionary;
/// arrays and data are left out).
#[derive(Debug, Clone, PartialEq)]
pub enum PlistValue {
    /// A CFNumber of an integer type.
    Int(i64),
    /// A CFNumber of a floating-point type.
    Float(f64),
    /// A CFBoolean (`Yes` / `No` in ioreg's text).
    Bool(bool),
    /// A CFString.
    Str(String),
    /// A CFDictionary with string keys.
    Dict(BTreeMap<String, PlistValue>),
}

impl PlistValue {
    /// The value as a number, if it is one.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            PlistValue::Int(i) => Some(*i as f64),
            PlistValue::Float(f) if f.is_finite() => Some(*f),
            _ => None,
        }
    }

    /// The value as a count of bytes, if it is a number that is not negative.
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            PlistValue::Int(i) => u64::try_from(*i).ok(),
            PlistValue::Float(f) if f.is_finite() && *f >= 0.0 => Some(*f as u64),
            _ => None,
        }
    }
}

fn num(stats: &BTreeMap<String, PlistValue>, key: &str) -> Option<f64> {
    stats.get(key).and_then(PlistValue::as_f64)
}

fn bytes(stats: &BTreeMap<String, PlistValue>, key: &str) -> Option<u64> {
    stats.get(key).and_then(PlistValue::as_u64)
}

/// The reading of GPU `index` called `name`, from its `PerformanceStatistics` dictionary.
/// What the dictionary lacks stays `None`; without `Device Utilization %` the status says so.
pub fn reading_from_statistics(
    index: u32,
    name: &str,
    stats: &BTreeMap<String, PlistValue>,
) -> Reading {
    let mut r = Reading::new(Vendor::Apple, index, name);
    r.utilization_percent = num(stats, "Device Utilization %").map(|u| u.clamp(0.0, 100.0));
    if r.utilization_percent.is_none() {
        r.status = Some("no \"Device Utilization %\" in PerformanceStatistics".to_string());
    }
    // Apple silicon: unified memory the GPU uses, of what its driver has allocated.
    r.memory_used_bytes = bytes(stats, "In use system memory");
    r.memory_total_bytes = bytes(stats, "Alloc system memory");
    // Discrete (and Intel) GPUs of Intel Macs: dedicated memory.
    if r.memory_used_bytes.is_none() {
        r.memory_used_bytes =
            bytes(stats, "vramUsedBytes").or_else(|| bytes(stats, "inUseVidMemoryBytes"));
    }
    if r.memory_total_bytes.is_none() {
        if let (Some(u), Some(f)) = (bytes(stats, "vramUsedBytes"), bytes(stats, "vramFreeBytes")) {
            r.memory_total_bytes = Some(u.saturating_add(f));
        }
    }
    // System memory mapped for the GPU through its GART: the GTT fields.
    r.gtt_used_bytes = bytes(stats, "gartUsedBytes");
    if let (Some(u), Some(f)) = (r.gtt_used_bytes, bytes(stats, "gartFreeBytes")) {
        r.gtt_total_bytes = Some(u.saturating_add(f));
    }
    r.temperature_c = num(stats, "Temperature(C)");
    r.power_w = num(stats, "Total Power(W)");
    r
}

/// Parses a dictionary in the notation `ioreg` prints (`{"Device Utilization %"=12,"In use
/// system memory"=340983808,...}`): quoted keys, `=`, values that are integers, decimals,
/// `Yes` / `No`, quoted strings or nested dictionaries. Arrays `(...)` and data `<...>` are
/// skipped. `None` when the text is not such a dictionary.
pub fn parse_ioreg_dictionary(text: &str) -> Option<BTreeMap<String, PlistValue>> {
    let mut p = TextParser {
        s: text.trim().as_bytes(),
        i: 0,
    };
    let d = p.dict(0)?;
    p.ws();
    (p.i == p.s.len()).then_some(d)
}

struct TextParser<'a> {
    s: &'a [u8],
    i: usize,
}

impl TextParser<'_> {
    fn ws(&mut self) {
        while self.s.get(self.i).is_some_and(u8::is_ascii_whitespace) {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        self.ws();
        (self.s.get(self.i) == Some(&c)).then(|| self.i += 1)
    }

    fn string(&mut self) -> Option<String> {
        self.eat(b'"')?;
        let mut out = Vec::new();
        loop {
            match *self.s.get(self.i)? {
                b'"' => {
                    self.i += 1;
                    return Some(String::from_utf8_lossy(&out).into_owned());
                }
                b'\\' => {
                    out.push(*self.s.get(self.i + 1)?);
                    self.i += 2;
                }
                c => {
                    out.push(c);
                    self.i += 1;
                }
            }
        }
    }

    /// Skips a bracketed value (`(...)` or `<...>`), nested brackets and strings included.
    fn skip_group(&mut self, depth: usize) -> Option<()> {
        let (open, close) = match *self.s.get(self.i)? {
            b'(' => (b'(', b')'),
            b'<' => (b'<', b'>'),
            _ => return None,
        };
        if depth > 32 {
            return None;
        }
        self.i += 1;
        loop {
            self.ws();
            match *self.s.get(self.i)? {
                c if c == close => {
                    self.i += 1;
                    return Some(());
                }
                b'"' => {
                    self.string()?;
                }
                b'(' | b'<' => self.skip_group(depth + 1)?,
                b'{' => {
                    self.dict(depth + 1)?;
                }
                c if c == open => return None,
                _ => self.i += 1,
            }
        }
    }

    fn value(&mut self, depth: usize) -> Option<Option<PlistValue>> {
        self.ws();
        match *self.s.get(self.i)? {
            b'{' => Some(Some(PlistValue::Dict(self.dict(depth + 1)?))),
            b'"' => Some(Some(PlistValue::Str(self.string()?))),
            b'(' | b'<' => {
                self.skip_group(depth + 1)?;
                Some(None)
            }
            _ => {
                let start = self.i;
                while self
                    .s
                    .get(self.i)
                    .is_some_and(|c| !matches!(c, b',' | b'}') && !c.is_ascii_whitespace())
                {
                    self.i += 1;
                }
                let word = std::str::from_utf8(&self.s[start..self.i]).ok()?;
                Some(Some(match word {
                    "Yes" => PlistValue::Bool(true),
                    "No" => PlistValue::Bool(false),
                    w => match w.parse::<i64>() {
                        Ok(i) => PlistValue::Int(i),
                        Err(_) => PlistValue::Float(w.parse::<f64>().ok()?),
                    },
                }))
            }
        }
    }

    fn dict(&mut self, depth: usize) -> Option<BTreeMap<String, PlistValue>> {
        if depth > 32 {
            return None;
        }
        self.eat(b'{')?;
        let mut out = BTreeMap::new();
        if self.eat(b'}').is_some() {
            return Some(out);
        }
        loop {
            let key = self.string()?;
            self.eat(b'=')?;
            if let Some(v) = self.value(depth)? {
                out.insert(key, v);
            }
            if self.eat(b',').is_some() {
                continue;
            }
            self.eat(b'}')?;
            return Some(out);
        }
    }
}

/// Reads the GPUs of a Mac from IOKit (on other platforms there are none).
#[derive(Default)]
pub struct AppleReader {}

impl AppleReader {
    /// A reader with nothing remembered yet.
    pub fn new() -> AppleReader {
        AppleReader::default()
    }
}

impl Reader for AppleReader {
    fn vendor(&self) -> Vendor {
        Vendor::Apple
    }

    #[cfg(target_os = "macos")]
    fn read(&mut self, _roots: &Roots) -> Result<Vec<Reading>, crate::Error> {
        let entries = macos::accelerators()?;
        Ok(entries
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let name = e.model.clone().unwrap_or_else(|| "Apple GPU".to_string());
                let mut r = match &e.statistics {
                    Some(stats) => reading_from_statistics(i as u32, &name, stats),
                    None => {
                        let mut r = Reading::new(Vendor::Apple, i as u32, name);
                        r.status = Some("no PerformanceStatistics".to_string());
                        r
                    }
                };
                r.driver = e.class.clone();
                r
            })
            .collect())
    }

    #[cfg(not(target_os = "macos"))]
    fn read(&mut self, _roots: &Roots) -> Result<Vec<Reading>, crate::Error> {
        Ok(Vec::new())
    }
}

/// The IOKit walk: every `IOAccelerator` service, its `PerformanceStatistics`, `model` and
/// `IOClass`.
///
/// NOT COMPILED on the development machines (Linux, no macOS target): written against Apple's
/// headers (IOKit/IOKitLib.h, CoreFoundation/CFDictionary.h, CFNumber.h, CFString.h) with the
/// C types spelled out: `mach_port_t`/`io_object_t` = `unsigned int` (u32), `kern_return_t` =
/// `int`, `CFIndex` = `long`, `CFTypeID` = `unsigned long`, `Boolean` = `unsigned char`,
/// `CFStringEncoding` = `UInt32`, `CFNumberType` = `CFIndex`. Ownership follows CoreFoundation's
/// rules: the matching dictionary is consumed by `IOServiceGetMatchingServices`; the
/// properties dictionary (Create rule) and the key CFStrings we create are released once;
/// values got from a dictionary (Get rule) are not; the iterator and each entry are released
/// with `IOObjectRelease`. Main port 0 (`MACH_PORT_NULL`) asks for the default one, valid for
/// both `kIOMasterPortDefault` and its successor `kIOMainPortDefault`.
#[cfg(target_os = "macos")]
mod macos {
    use std::collections::BTreeMap;
    use std::ffi::{c_char, c_void, CStr, CString};

    use super::PlistValue;

    /// An IOKit call that failed.
    fn query(detail: String) -> crate::Error {
        crate::Error::Query {
            interface: "IOKit",
            detail,
        }
    }

    type CFTypeRef = *const c_void;
    type CFDictionaryRef = *const c_void;
    type CFStringRef = *const c_void;
    type CFAllocatorRef = *const c_void;
    type CFIndex = isize;
    type CFTypeID = usize;
    type Boolean = u8;
    type MachPort = u32;
    type IoObject = u32;
    type KernReturn = i32;

    const K_CF_NUMBER_SINT64: CFIndex = 4;
    const K_CF_NUMBER_FLOAT64: CFIndex = 6;
    const K_CF_STRING_ENCODING_UTF8: u32 = 0x0800_0100;

    #[link(name = "IOKit", kind = "framework")]
    extern "C" {
        fn IOServiceMatching(name: *const c_char) -> CFDictionaryRef;
        fn IOServiceGetMatchingServices(
            main_port: MachPort,
            matching: CFDictionaryRef,
            existing: *mut IoObject,
        ) -> KernReturn;
        fn IOIteratorNext(iterator: IoObject) -> IoObject;
        fn IORegistryEntryCreateCFProperties(
            entry: IoObject,
            properties: *mut CFDictionaryRef,
            allocator: CFAllocatorRef,
            options: u32,
        ) -> KernReturn;
        fn IOObjectRelease(object: IoObject) -> KernReturn;
    }

    #[link(name = "CoreFoundation", kind = "framework")]
    extern "C" {
        fn CFDictionaryGetValue(dict: CFDictionaryRef, key: *const c_void) -> *const c_void;
        fn CFDictionaryGetCount(dict: CFDictionaryRef) -> CFIndex;
        fn CFDictionaryGetKeysAndValues(
            dict: CFDictionaryRef,
            keys: *mut *const c_void,
            values: *mut *const c_void,
        );
        fn CFGetTypeID(cf: CFTypeRef) -> CFTypeID;
        fn CFDictionaryGetTypeID() -> CFTypeID;
        fn CFNumberGetTypeID() -> CFTypeID;
        fn CFStringGetTypeID() -> CFTypeID;
        fn CFBooleanGetTypeID() -> CFTypeID;
        fn CFNumberIsFloatType(number: CFTypeRef) -> Boolean;
        fn CFNumberGetValue(number: CFTypeRef, the_type: CFIndex, value: *mut c_void) -> Boolean;
        fn CFBooleanGetValue(boolean: CFTypeRef) -> Boolean;
        fn CFStringCreateWithCString(
            alloc: CFAllocatorRef,
            c_str: *const c_char,
            encoding: u32,
        ) -> CFStringRef;
        fn CFStringGetCString(
            string: CFStringRef,
            buffer: *mut c_char,
            buffer_size: CFIndex,
            encoding: u32,
        ) -> Boolean;
        fn CFRelease(cf: CFTypeRef);
    }

    /// One `IOAccelerator` entry.
    pub(super) struct Entry {
        pub(super) model: Option<String>,
        pub(super) class: Option<String>,
        pub(super) statistics: Option<BTreeMap<String, PlistValue>>,
    }

    /// Every `IOAccelerator` entry, in registry order.
    pub(super) fn accelerators() -> Result<Vec<Entry>, crate::Error> {
        let class = CString::new("IOAccelerator").map_err(|e| query(e.to_string()))?;
        let mut out = Vec::new();
        // SAFETY: see the module's notes on types and ownership.
        unsafe {
            let matching = IOServiceMatching(class.as_ptr());
            if matching.is_null() {
                return Err(query("IOServiceMatching(IOAccelerator) failed".to_string()));
            }
            let mut iter: IoObject = 0;
            // Consumes `matching`, whatever the result.
            let kr = IOServiceGetMatchingServices(0, matching, &mut iter);
            if kr != 0 {
                return Err(query(format!(
                    "IOServiceGetMatchingServices failed ({kr:#x})"
                )));
            }
            loop {
                let entry = IOIteratorNext(iter);
                if entry == 0 {
                    break;
                }
                let mut props: CFDictionaryRef = std::ptr::null();
                let kr = IORegistryEntryCreateCFProperties(entry, &mut props, std::ptr::null(), 0);
                if kr == 0 && !props.is_null() {
                    let stats = get(props, "PerformanceStatistics").and_then(|v| match v {
                        PlistValue::Dict(d) => Some(d),
                        _ => None,
                    });
                    let text = |key: &str| match get(props, key) {
                        Some(PlistValue::Str(s)) => Some(s),
                        _ => None,
                    };
                    out.push(Entry {
                        model: text("model"),
                        class: text("IOClass"),
                        statistics: stats,
                    });
                    CFRelease(props);
                }
                IOObjectRelease(entry);
            }
            IOObjectRelease(iter);
        }
        Ok(out)
    }

    /// `dict[key]`, converted.
    unsafe fn get(dict: CFDictionaryRef, key: &str) -> Option<PlistValue> {
        let ckey = CString::new(key).ok()?;
        let cfkey =
            CFStringCreateWithCString(std::ptr::null(), ckey.as_ptr(), K_CF_STRING_ENCODING_UTF8);
        if cfkey.is_null() {
            return None;
        }
        let v = CFDictionaryGetValue(dict, cfkey);
        CFRelease(cfkey);
        if v.is_null() {
            None
        } else {
            convert(v, 0)
        }
    }

    unsafe fn string(s: CFStringRef) -> Option<String> {
        let mut buf = vec![0 as c_char; 1024];
        if CFStringGetCString(
            s,
            buf.as_mut_ptr(),
            buf.len() as CFIndex,
            K_CF_STRING_ENCODING_UTF8,
        ) == 0
        {
            return None;
        }
        Some(CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned())
    }

    unsafe fn convert(v: CFTypeRef, depth: usize) -> Option<PlistValue> {
        let t = CFGetTypeID(v);
        if t == CFNumberGetTypeID() {
            if CFNumberIsFloatType(v) != 0 {
                let mut f: f64 = 0.0;
                (CFNumberGetValue(v, K_CF_NUMBER_FLOAT64, &mut f as *mut f64 as *mut c_void) != 0)
                    .then_some(PlistValue::Float(f))
            } else {
                let mut i: i64 = 0;
                (CFNumberGetValue(v, K_CF_NUMBER_SINT64, &mut i as *mut i64 as *mut c_void) != 0)
                    .then_some(PlistValue::Int(i))
            }
        } else if t == CFBooleanGetTypeID() {
            Some(PlistValue::Bool(CFBooleanGetValue(v) != 0))
        } else if t == CFStringGetTypeID() {
            string(v).map(PlistValue::Str)
        } else if t == CFDictionaryGetTypeID() && depth < 4 {
            let n = CFDictionaryGetCount(v);
            if n <= 0 || n > 4096 {
                return Some(PlistValue::Dict(BTreeMap::new()));
            }
            let n = n as usize;
            let mut keys: Vec<*const c_void> = vec![std::ptr::null(); n];
            let mut values: Vec<*const c_void> = vec![std::ptr::null(); n];
            CFDictionaryGetKeysAndValues(v, keys.as_mut_ptr(), values.as_mut_ptr());
            let mut out = BTreeMap::new();
            for (k, val) in keys.into_iter().zip(values) {
                if k.is_null() || val.is_null() || CFGetTypeID(k) != CFStringGetTypeID() {
                    continue;
                }
                if let (Some(k), Some(val)) = (string(k), convert(val, depth + 1)) {
                    out.insert(k, val);
                }
            }
            Some(PlistValue::Dict(out))
        } else {
            None
        }
    }
}
