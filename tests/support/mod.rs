//! Shared helpers for the integration tests.

#![allow(dead_code)]

pub mod elfgen;
pub mod gpugen;
pub mod python;
pub mod wheelgen;

use std::path::Path;
use std::process::{Command, Output};

/// Run the real `wheelfix` binary with `args` in `cwd`.
pub fn wheelfix(cwd: &Path, args: &[&str]) -> Output {
    wheelfix_env(cwd, args, &[])
}

/// [`wheelfix`] with environment variables set (the `AUDITWHEEL_*` ones of the test's own
/// environment, as a manylinux image sets them, are removed first).
pub fn wheelfix_env(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_wheelfix"));
    command.args(args).current_dir(cwd).env_remove("SOURCE_DATE_EPOCH").env("LD_LIBRARY_PATH", "");
    for name in ["AUDITWHEEL_PLAT", "AUDITWHEEL_ZIP_COMPRESSION_LEVEL", "AUDITWHEEL_LD_LIBRARY_PATH"] {
        command.env_remove(name);
    }
    command.envs(env.iter().copied());
    command.output().expect("wheelfix runs")
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// `show --json` of one wheel, parsed.
pub fn show_json(cwd: &Path, wheel: &Path, extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["show", "--json"];
    args.extend_from_slice(extra);
    let wheel = wheel.to_str().unwrap();
    args.push(wheel);
    let out = wheelfix(cwd, &args);
    let value: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("show --json printed no JSON ({e}): {}{}", stdout(&out), stderr(&out)));
    value[0].clone()
}
