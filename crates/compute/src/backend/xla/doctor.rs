//! XLA: each PJRT plugin with its load time and notes, libtpu's metadata-server trap.

use crate::base::check::{check, Check, Status};

// ---- XLA ------------------------------------------------------------------------------------

pub(crate) fn xla_checks(probe_seconds: f64) -> Vec<Check> {
    let mut v = Vec::new();
    let plugins = super::plugins();
    if plugins.is_empty() {
        v.push(check(
            "xla.plugins",
            "PJRT plugins found",
            Status::Warn,
            "no PJRT plugin in ACCEL_PJRT_PLUGIN, PJRT_NAMES_AND_LIBRARY_PATHS or any Python \
             environment",
            format!(
                "for XLA on the CPU `pip install lammps-jax-pjrt-cpu`; on NVIDIA GPUs {}; on a \
                 TPU VM `pip install libtpu`{}",
                crate::backend::native::libs::jax_cuda_extra(
                    crate::backend::native::libs::driver_cuda_version()
                ),
                crate::base::system::Hosted::tpu_note()
            ),
        ));
    }
    for p in &plugins {
        let what = format!(
            "{} ({}; {:.2} s)",
            p.path.display(),
            p.source,
            probe_seconds
        );
        v.push(match &p.problem {
            None => check(
                "xla.plugin",
                "a PJRT plugin loads and lists devices",
                if p.notes.is_empty() {
                    Status::Pass
                } else {
                    Status::Warn
                },
                format!(
                    "{what}: platform {}{}, {} device(s), PJRT {}{}{}",
                    p.platform.as_deref().unwrap_or("?"),
                    if p.platform.as_deref() == Some("cpu") {
                        " (XLA's compiler on this CPU: not an accelerator, never the best device)"
                    } else {
                        ""
                    },
                    p.devices,
                    p.pjrt_api_version.as_deref().unwrap_or("?"),
                    if p.preloaded.is_empty() {
                        String::new()
                    } else {
                        format!(", {} CUDA libraries loaded first", p.preloaded.len())
                    },
                    p.notes.iter().map(|n| format!("; {n}")).collect::<String>()
                ),
                if p.notes.is_empty() {
                    ""
                } else {
                    "see the note: the plugin runs, but not as accel asked"
                },
            ),
            Some(why) => check(
                "xla.plugin",
                "a PJRT plugin loads and lists devices",
                Status::Fail,
                format!("{what}: {why}"),
                "reinstall the plugin's wheel into this environment, or point \
                 ACCEL_PJRT_PLUGIN at a working one; ACCEL_PJRT_TIMEOUT waits longer",
            ),
        });
    }
    let tpu = plugins
        .iter()
        .any(|p| p.path.file_name().is_some_and(|n| n == "libtpu.so"));
    // The lock file is a cause of its own (`others::tpu`: stale, or held and by whom).
    v.push(if !tpu {
        check(
            "xla.libtpu_traps",
            "libtpu's metadata server",
            Status::Skip,
            "no libtpu found",
            "",
        )
    } else if std::env::var_os("TPU_SKIP_MDS_QUERY").is_none()
        && !crate::base::probe_child::active()
    {
        check(
            "xla.libtpu_traps",
            "libtpu's metadata server",
            Status::Warn,
            "TPU_SKIP_MDS_QUERY is unset and libtpu is probed in this process: off a TPU VM \
             libtpu retries a metadata server for minutes",
            "the accel command and `import accelkit` probe in a helper started with it; in your \
             own program call accelkit::enable_probe_helper or accelkit::prepare_environment() \
             first, or export TPU_SKIP_MDS_QUERY=1",
        )
    } else if std::env::var_os("TPU_SKIP_MDS_QUERY").is_none() {
        check(
            "xla.libtpu_traps",
            "libtpu's metadata server",
            Status::Pass,
            "TPU_SKIP_MDS_QUERY unset here, given to the probe helpers",
            "",
        )
    } else {
        check(
            "xla.libtpu_traps",
            "libtpu's metadata server",
            Status::Pass,
            "TPU_SKIP_MDS_QUERY set",
            "",
        )
    });
    v
}
