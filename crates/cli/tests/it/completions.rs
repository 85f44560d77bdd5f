//! The version line, shell completions loaded into a real bash, and the man page.

use std::process::Command;

fn accel(args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_accel"))
        .args(args)
        .output()
        .expect("accel runs");
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn version_names_the_backends_compiled_in() {
    let v = accel(&["--version"]);
    assert!(
        v.starts_with(&format!(
            "accel {} (backends compiled in: cpu",
            env!("CARGO_PKG_VERSION")
        )),
        "{v}"
    );
    // This test build has the default features.
    for b in ["cuda", "xla", "wgpu"] {
        assert!(v.contains(b), "{v}");
    }
}

#[test]
fn bash_completes_subcommands_and_options() {
    if Command::new("bash").arg("--version").output().is_err() {
        println!("skipped: bash: not installed (bash_completes_subcommands_and_options)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("accel-completion-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("accel.bash");
    std::fs::write(&script, accel(&["completions", "bash"])).unwrap();
    // What bash's programmable completion does on `accel be<TAB>`: the completion function
    // registered for `accel`, called with the words typed so far.
    let complete = |line: &str| -> String {
        let words: Vec<&str> = line.split(' ').collect();
        let o = Command::new("bash")
            .arg("--norc")
            .arg("-c")
            .arg(format!(
                "source {}; f=$(complete -p accel | sed -E 's/.*-F ([^ ]+).*/\\1/'); \
                 COMP_WORDS=({line}); COMP_CWORD={cword}; COMP_LINE='{line}'; COMP_POINT={point}; \
                 $f accel '{cur}' '{prev}'; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
                script.display(),
                cword = words.len() - 1,
                point = line.len(),
                cur = words.last().unwrap(),
                prev = words[words.len().saturating_sub(2)],
            ))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    assert_eq!(complete("accel be").trim(), "bench");
    let sub = complete("accel bench m");
    assert_eq!(sub.trim(), "matmul", "{sub}");
    let opts = complete("accel doctor --");
    assert!(opts.lines().any(|l| l == "--json"), "{opts}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn zsh_and_fish_scripts_and_the_man_page_are_generated() {
    assert!(accel(&["completions", "zsh"]).starts_with("#compdef accel"));
    assert!(accel(&["completions", "fish"]).contains("complete -c accel"));
    let man = accel(&["man"]);
    assert!(man.contains(".TH accel 1"), "{man}");
    for sub in ["devices", "doctor", "bench", "monitor", "serve", "mem"] {
        assert!(man.contains(sub), "{sub} missing from the man page");
    }
}
