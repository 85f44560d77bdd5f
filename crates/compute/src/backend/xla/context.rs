//! The XLA runtime: every PJRT plugin found, loaded once per process (each first in a probe
//! helper where the program enabled one, with a time limit), their clients and addressable
//! devices (`XlaDevice`: one device in use).

use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use super::pjrt::{Client, PjrtError};

use super::plugins::{plugin_candidates, plugin_preloads, Plugin, LOAD_STEP, SKIP_IN_HELPER};
use crate::{Device, Error, Result};

/// One addressable device: which client, which of its devices.
pub(crate) struct XlaDevice {
    pub client: Arc<Client>,
    pub index: usize,
    pub device: Device,
    /// Results not yet waited for.
    pub(crate) pending: Mutex<Vec<Weak<super::pjrt::Buffer>>>,
}

pub(crate) struct Runtime {
    pub plugins: Vec<Plugin>,
    pub devices: Vec<Arc<XlaDevice>>,
}

/// How long one plugin may take to load and start its client (`ACCEL_PJRT_TIMEOUT`, checked
/// by the central parser: a bad value is an error naming it, reported as the probe's reason).
fn load_limit() -> std::result::Result<Duration, crate::base::env::EnvError> {
    crate::base::env::seconds("ACCEL_PJRT_TIMEOUT", 60.0, 0.1, 3600.0)
}

fn platform_rank(p: &str) -> u8 {
    match p.to_ascii_lowercase().as_str() {
        "tpu" => 0,
        "cuda" | "gpu" | "rocm" => 1,
        "cpu" => 3,
        _ => 2,
    }
}

/// Loads every plugin once per process.
pub(crate) fn runtime() -> &'static Runtime {
    static RT: OnceLock<Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        let env = crate::backend::native::libs::SearchEnv::from_process();
        let mut plugins = Vec::new();
        let mut clients: Vec<Arc<Client>> = Vec::new();
        let limit = load_limit();
        let candidates = plugin_candidates(&env);
        let (refused, mut set_aside) = ask_helpers(&candidates, &limit);
        if let Some(skip) = SKIP_IN_HELPER.get() {
            set_aside.extend(skip.iter().map(|p| (p.clone(), "skipped".to_string())));
        }
        let mut stalled_here = false;
        for (path, source) in candidates {
            let mut plugin = Plugin {
                path: path.clone(),
                source,
                platform: None,
                platform_version: None,
                pjrt_api_version: None,
                devices: 0,
                problem: None,
                stalled: false,
                preloaded: Vec::new(),
                notes: Vec::new(),
            };
            if let Some(r) = &refused {
                plugin.problem = Some(format!("not loaded: {}", r.reason));
                plugins.push(plugin);
                continue;
            }
            if let Some((_, why)) = set_aside.iter().find(|(p, _)| *p == path) {
                plugin.stalled = why.contains("did not start within");
                plugin.problem = Some(why.clone());
                plugins.push(plugin);
                continue;
            }
            if stalled_here {
                // A plugin whose constructor hangs holds the dynamic loader's lock: every
                // later dlopen in this process would wait behind it.
                plugin.problem = Some("not tried: an earlier plugin's load stalled".to_string());
                plugins.push(plugin);
                continue;
            }
            let limit = match &limit {
                Ok(l) => *l,
                Err(e) => {
                    // No time limit, no load: nothing runs that could not be stopped.
                    plugin.problem = Some(format!("not loaded: {e}"));
                    plugins.push(plugin);
                    continue;
                }
            };
            let is_tpu = path.file_name().is_some_and(|n| n == "libtpu.so");
            // Off a TPU VM, libtpu retries a metadata server for minutes unless
            // TPU_SKIP_MDS_QUERY is set: `accelkit::prepare_environment` sets it (the accel
            // command does, before any thread starts); the load's time limit bounds the rest.
            if is_tpu && std::path::Path::new("/tmp/libtpu_lockfile").exists() {
                plugin.problem = Some(
                    "/tmp/libtpu_lockfile exists: another process may hold the TPU (libtpu \
                     allows one process); stop it, or remove the file if it is stale"
                        .to_string(),
                );
            }
            // JAX's CUDA plugin needs the CUDA wheels' libraries loaded first, as JAX's own
            // package does: by absolute path, from the plugin's own site-packages.
            for lib in plugin_preloads(&path) {
                match crate::backend::native::libs::preload(&lib) {
                    Ok(()) => plugin.preloaded.push(lib),
                    Err(e) => plugin
                        .notes
                        .push(format!("could not preload {}: {e}", lib.display())),
                }
            }
            crate::base::probe_child::step(format!("{}{}", LOAD_STEP, path.display()));
            // The answer comes back through a Mutex and a Condvar, not a channel: a
            // channel's first blocking receive in a thread registers a thread-local
            // destructor, which takes the dynamic loader's lock, and a plugin whose
            // constructor hangs holds that lock inside dlopen: the receive then never timed
            // out (traced with gdb: 1 in 10 runs of the probe_helper tests under load).
            let slot = Arc::new((Mutex::new(None), std::sync::Condvar::new()));
            let answer = slot.clone();
            let p = path.clone();
            let _ = std::thread::Builder::new()
                .name("accel-pjrt-load".into())
                .spawn(move || {
                    // GPU plugins take most of the GPU's memory at start unless told not to;
                    // accel shares the GPU with its own CUDA backend and other processes.
                    let gpu = p.to_string_lossy().contains("cuda");
                    let options: &[(&str, bool)] =
                        if gpu { &[("preallocate", false)] } else { &[] };
                    let r = super::pjrt::Api::load(&p).and_then(|api| start_client(api, options));
                    let (m, cv) = &*answer;
                    *m.lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
                    cv.notify_one();
                });
            let (m, cv) = &*slot;
            let waiting = m.lock().unwrap_or_else(|e| e.into_inner());
            // The lock is released at the end of this statement.
            let got = cv
                .wait_timeout_while(waiting, limit, |r| r.is_none())
                .unwrap_or_else(|e| e.into_inner())
                .0
                .take();
            match got.ok_or(()) {
                Ok(Ok((c, note))) => {
                    plugin.notes.extend(note);
                    plugin.platform = Some(c.platform.clone());
                    plugin.platform_version = Some(c.platform_version.clone());
                    plugin.pjrt_api_version =
                        Some(format!("{}.{}", c.api.version().0, c.api.version().1));
                    plugin.devices = c.devices.len();
                    if c.devices.is_empty() {
                        plugin
                            .problem
                            .get_or_insert_with(|| "the plugin started but has no devices".into());
                    }
                    clients.push(Arc::new(c));
                }
                Ok(Err(e)) => {
                    plugin.problem = Some(explain(&e, &path));
                }
                Err(_) => {
                    plugin.stalled = true;
                    stalled_here = true;
                    plugin.problem = Some(format!(
                        "did not start within {:.1} s (set ACCEL_PJRT_TIMEOUT to wait longer)",
                        limit.as_secs_f64()
                    ))
                }
            }
            plugins.push(plugin);
        }
        clients.sort_by_key(|c| platform_rank(&c.platform));
        let mut devices = Vec::new();
        for c in clients {
            for index in 0..c.devices.len() {
                let device = Device::Xla(devices.len());
                devices.push(Arc::new(XlaDevice {
                    client: c.clone(),
                    index,
                    device,
                    pending: Mutex::new(Vec::new()),
                }));
            }
        }
        Runtime { plugins, devices }
    })
}

/// Where the program enabled the probe helper: loads the plugins in helpers first, and sets
/// aside each one that stalls (past `ACCEL_PJRT_TIMEOUT`) or kills its helper (crash, or past
/// `ACCEL_PROBE_TIMEOUT`), asking again without it, until a helper loads the rest. Returns a
/// refusal that holds for every plugin (the helper could not run at all) and the plugins set
/// aside, with why.
#[allow(clippy::type_complexity)]
fn ask_helpers(
    candidates: &[(std::path::PathBuf, String)],
    limit: &std::result::Result<Duration, crate::base::env::EnvError>,
) -> (
    Option<crate::base::probe_child::Refusal>,
    Vec<(std::path::PathBuf, String)>,
) {
    use crate::base::probe_child;
    let mut aside: Vec<(std::path::PathBuf, String)> = Vec::new();
    if !probe_child::active() || candidates.is_empty() {
        return (None, aside);
    }
    for round in 0..=candidates.len() {
        let extra: Vec<std::ffi::OsString> = aside
            .iter()
            .flat_map(|(p, _)| ["--skip".into(), p.clone().into_os_string()])
            .collect();
        // The first round is the shared verdict (`registry::probe_side_by_side` may have it
        // already).
        let verdict = if round == 0 {
            probe_child::canary("xla")
        } else {
            probe_child::run_task("xla", &extra)
        };
        match verdict {
            Ok(Some(answer)) => {
                let stalled = answer
                    .parse::<super::listing::HelperAnswer>()
                    .map(|a| a.stalled)
                    .unwrap_or_default();
                let new: Vec<std::path::PathBuf> = stalled
                    .into_iter()
                    .filter(|p| !aside.iter().any(|(q, _)| q == p))
                    .collect();
                if new.is_empty() {
                    return (None, aside);
                }
                for p in new {
                    aside.push((
                        p,
                        format!(
                            "did not start within {} in the probe helper (killed there; not \
                             loaded here): set ACCEL_PJRT_TIMEOUT to wait longer",
                            match limit {
                                Ok(l) => format!("{:.1} s", l.as_secs_f64()),
                                Err(_) => "its time limit".to_string(),
                            }
                        ),
                    ));
                }
            }
            Ok(None) => return (None, aside),
            Err(r) => match r.step.strip_prefix(LOAD_STEP) {
                Some(p) if !aside.iter().any(|(q, _)| q.as_os_str() == p) => aside.push((
                    std::path::PathBuf::from(p),
                    format!("not loaded: {}", r.reason),
                )),
                _ => return (Some(r), aside),
            },
        }
    }
    (None, aside)
}

/// Starts a client with `options`; when the plugin rejects them, starts it with its defaults
/// and says so (a GPU plugin that refuses `preallocate=false` takes 75% of the GPU's memory).
pub(crate) fn start_client(
    api: Arc<super::pjrt::Api>,
    options: &[(&str, bool)],
) -> std::result::Result<(Client, Option<String>), PjrtError> {
    if options.is_empty() {
        return Client::create(api, &[]).map(|c| (c, None));
    }
    match Client::create(api.clone(), options) {
        Ok(c) => Ok((c, None)),
        Err(e) => {
            let asked: Vec<String> = options.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let c = Client::create(api, &[])?;
            Ok((
                c,
                Some(format!(
                    "the plugin rejected the client option{} {} ({e}) and runs with its \
                     defaults{}",
                    if asked.len() == 1 { "" } else { "s" },
                    asked.join(", "),
                    if options.iter().any(|(k, _)| *k == "preallocate") {
                        ": it may take most of the GPU's memory at start"
                    } else {
                        ""
                    }
                )),
            ))
        }
    }
}

fn explain(e: &PjrtError, path: &std::path::Path) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if name == "libtpu.so" && e.message.contains("jellyfish") || e.message.contains("TPU") {
        format!("no TPU on this machine ({e})")
    } else {
        e.to_string()
    }
}

pub(crate) fn device(i: usize) -> Result<Arc<XlaDevice>> {
    runtime()
        .devices
        .get(i)
        .cloned()
        .ok_or_else(|| Error::internal(format!("xla:{i} is not among the plugin's devices")))
}

/// (free, total) bytes of an XLA device, where its plugin reports them.
pub(crate) fn device_memory(dev: &XlaDevice) -> Option<(u64, u64)> {
    let (used, limit) = dev.client.memory_stats(dev.index).ok()?;
    let limit = limit? as u64;
    Some((limit.saturating_sub(used as u64), limit))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// XLA's CPU plugin from the test environment (scripts/test.sh installs it).
    fn cpu_plugin() -> Option<std::path::PathBuf> {
        let env = crate::backend::native::libs::SearchEnv::from_process();
        plugin_candidates(&env)
            .into_iter()
            .map(|(p, _)| p)
            .find(|p| p.to_string_lossy().contains("cpu"))
    }

    #[test]
    fn a_client_option_the_plugin_rejects_is_reported_and_the_client_still_starts() {
        let Some(path) = cpu_plugin() else {
            let required = std::env::var("ACCEL_TEST_REQUIRE")
                .is_ok_and(|v| v.split(',').any(|b| b.trim() == "xla"));
            assert!(
                !required,
                "ACCEL_TEST_REQUIRE names xla but no CPU plugin was found"
            );
            println!("skipped: xla: no CPU PJRT plugin (a_client_option_the_plugin_rejects)");
            return;
        };
        let api = crate::backend::xla::pjrt::Api::load(&path).expect("the CPU plugin loads");
        let (c, note) = start_client(api.clone(), &[]).expect("starts with no options");
        assert!(note.is_none() && !c.devices.is_empty());
        drop(c);
        let r = start_client(api, &[("accel_no_such_option", true)]);
        let (c, note) = r.expect("starts, with its defaults if it must");
        assert!(!c.devices.is_empty());
        // XLA's CPU plugin refuses option names it does not know.
        let note = note.expect("the rejection is reported");
        assert!(
            note.contains("accel_no_such_option=true") && note.contains("defaults"),
            "{note}"
        );
    }
}
