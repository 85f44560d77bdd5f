//! accel's own settings (`ACCEL_*` variables, folders refused as sources of native code, the
//! runtime folder): checks that apply to every backend. The CPU's own checklist is
//! `backend::cpu::doctor::cpu_checks`.

use crate::base::check::{check, Check, Status};

/// The `ACCEL_*` variables (every one range-checked by `base::env`) and the folders and
/// programs the library search refused to take native code from.
pub(super) fn environment_checks() -> Vec<Check> {
    let problems = crate::base::env::problems();
    let mut v = vec![if problems.is_empty() {
        let set: Vec<String> = crate::base::env::KNOWN
            .iter()
            .filter_map(|(k, _)| {
                std::env::var_os(k).map(|v| format!("{k}={}", v.to_string_lossy()))
            })
            .collect();
        check(
            "env.accel_variables",
            "accel's environment variables",
            Status::Pass,
            if set.is_empty() {
                "none set".to_string()
            } else {
                set.join(", ")
            },
            "",
        )
    } else {
        check(
            "env.accel_variables",
            "accel's environment variables",
            Status::Fail,
            problems.join("; "),
            "correct or unset the variables named",
        )
    }];
    v.push(match crate::base::env::runtime_dir_refused() {
        Some(why) => check(
            "env.runtime_dir",
            "the runtime folder (XDG_RUNTIME_DIR)",
            Status::Warn,
            why,
            "remove that folder (it was not made by you, or others can enter it), or set \
             XDG_RUNTIME_DIR to a private folder of yours",
        ),
        None => check(
            "env.runtime_dir",
            "the runtime folder (XDG_RUNTIME_DIR)",
            Status::Pass,
            std::env::var_os("XDG_RUNTIME_DIR")
                .map_or("unset".to_string(), |v| v.to_string_lossy().into_owned()),
            "",
        ),
    });
    let skipped = crate::backend::native::trust::skipped_so_far();
    v.push(if skipped.is_empty() {
        check(
            "env.untrusted_folders",
            "folders and programs refused as sources of native code",
            Status::Pass,
            "none",
            "",
        )
    } else {
        check(
            "env.untrusted_folders",
            "folders and programs refused as sources of native code",
            Status::Warn,
            skipped
                .iter()
                .map(|(p, why)| format!("{}: {why}", p.display()))
                .collect::<Vec<_>>()
                .join("; "),
            "accel loads libraries and plugins only from folders that you or root own and no one \
             else may write, up to / (as git's safe.directory); fix the owner or mode (chown, \
             chmod go-w) of the folder named, or, if you trust whoever else may write it, list \
             it in ACCEL_TRUSTED_DIRS",
        )
    });
    v
}
