//! The PJRT bindings alone, without accel: the C structs as the 0.114 header lays them out
//! (sizes worked out by hand from the header), and a real plugin (XLA's CPU plugin, which the
//! test command installs from PyPI into `.venv-test`) loaded, asked for its devices, given a
//! StableHLO program to compile and run, with the result checked against values computed
//! here. Without the plugin the run test prints `skipped: xla: ...` and passes, unless
//! `ACCEL_TEST_REQUIRE` names xla.
use std::path::PathBuf;

use super::sys::{self, args_size, slot};
use super::{Api, Client, ElementType};

#[test]
fn struct_sizes_and_slots_match_the_header() {
    // struct_size = offset of the last field + its size, as PJRT_DEFINE_STRUCT_TRAITS computes
    // it in pjrt_c_api.h 0.114 (worked out by hand from the header, x86-64).
    assert_eq!(args_size!(sys::ErrorDestroyArgs, error), 24);
    assert_eq!(args_size!(sys::ErrorMessageArgs, message_size), 40);
    assert_eq!(args_size!(sys::ErrorGetCodeArgs, code), 28);
    assert_eq!(args_size!(sys::PluginInitializeArgs, extension_start), 16);
    assert_eq!(args_size!(sys::EventArgs, event), 24);
    assert_eq!(args_size!(sys::EventOnReadyArgs, user_arg), 40);
    assert_eq!(args_size!(sys::ClientCreateArgs, kv_try_get_user_arg), 88);
    assert_eq!(args_size!(sys::NamedBool, value_size), 56);
    assert_eq!(args_size!(sys::ClientArgs, client), 24);
    assert_eq!(args_size!(sys::ClientStringArgs, value_size), 40);
    assert_eq!(args_size!(sys::ClientDevicesArgs, num_devices), 40);
    assert_eq!(args_size!(sys::Program, format_size), 48);
    assert_eq!(args_size!(sys::ClientCompileArgs, executable), 56);
    assert_eq!(args_size!(sys::BufferFromHostBufferArgs, buffer), 120);
    assert_eq!(args_size!(sys::DeviceDescriptionIdArgs, id), 28);
    assert_eq!(args_size!(sys::DeviceDescriptionStringArgs, value_size), 40);
    assert_eq!(
        args_size!(sys::DeviceGetDescriptionArgs, device_description),
        32
    );
    // device at 16, bytes_in_use at 24, ten (value, is_set) pairs of 16 bytes from 32, then
    // peak_allocated_bytes at 192 and its is_set flag at 200.
    assert_eq!(
        args_size!(sys::DeviceMemoryStatsArgs, peak_allocated_bytes_is_set),
        201
    );
    assert_eq!(args_size!(sys::LoadedExecutableDestroyArgs, executable), 24);
    assert_eq!(
        args_size!(sys::ExecuteOptions, num_hlo_output_callbacks),
        144
    );
    assert_eq!(
        args_size!(sys::LoadedExecutableExecuteArgs, execute_device),
        80
    );
    assert_eq!(args_size!(sys::BufferArgs, buffer), 24);
    assert_eq!(args_size!(sys::BufferToHostBufferArgs, event), 56);
    assert_eq!(args_size!(sys::BufferReadyEventArgs, event), 32);
    // PJRT_Api: struct_size, extension_start, a 24-byte version, then function pointers in
    // the header's order.
    assert_eq!(std::mem::size_of::<sys::ApiHeader>(), 40);
    let at = |s: usize| sys::slot_offset(s);
    assert_eq!(at(slot::ERROR_DESTROY), 40);
    assert_eq!(at(slot::PLUGIN_INITIALIZE), 64);
    assert_eq!(at(slot::EVENT_AWAIT), 104);
    assert_eq!(at(slot::EVENT_ON_READY), 112);
    assert_eq!(at(slot::CLIENT_CREATE), 120);
    assert_eq!(at(slot::CLIENT_ADDRESSABLE_DEVICES), 168);
    assert_eq!(at(slot::CLIENT_COMPILE), 200);
    assert_eq!(at(slot::CLIENT_BUFFER_FROM_HOST_BUFFER), 216);
    assert_eq!(at(slot::DEVICE_GET_DESCRIPTION), 272);
    assert_eq!(at(slot::DEVICE_MEMORY_STATS), 312);
    assert_eq!(at(slot::LOADED_EXECUTABLE_EXECUTE), 480);
    assert_eq!(at(slot::BUFFER_DESTROY), 504);
    assert_eq!(at(slot::BUFFER_TO_HOST_BUFFER), 600);
    assert_eq!(at(slot::BUFFER_READY_EVENT), 616);
}

/// XLA's CPU plugin: `PJRT_CPU_PLUGIN`, else the one pip put in the workspace's `.venv-test`
/// (or `VIRTUAL_ENV`).
fn cpu_plugin() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PJRT_CPU_PLUGIN") {
        return Some(PathBuf::from(p));
    }
    let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut venvs = vec![workspace.join(".venv-test")];
    if let Some(v) = std::env::var_os("VIRTUAL_ENV") {
        venvs.insert(0, PathBuf::from(v));
    }
    for v in venvs {
        for lib in std::fs::read_dir(v.join("lib"))
            .into_iter()
            .flatten()
            .flatten()
        {
            let p = lib
                .path()
                .join("site-packages/lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so");
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// The CPU plugin's client, or None after a skip line.
fn cpu_client(test: &str) -> Option<Client> {
    let Some(path) = cpu_plugin() else {
        accelkit_testkit::skip(
            "xla",
            "no CPU PJRT plugin in .venv-test (run scripts/test.sh)",
            test,
        );
        return None;
    };
    let api = Api::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        api.version.0 == 0 && api.version.1 >= 40,
        "{:?}",
        api.version
    );
    Some(Client::create(api, &[]).expect("the CPU plugin starts a client"))
}

#[test]
fn the_cpu_plugin_compiles_and_runs_a_program() {
    let Some(client) = cpu_client("the_cpu_plugin_compiles_and_runs_a_program") else {
        return;
    };
    assert_eq!(client.platform, "cpu");
    assert!(!client.devices.is_empty());
    // a * b + a over 6 f32 values, as StableHLO text.
    let mlir = "module @t {\n  func.func public @main(%a: tensor<6xf32>, %b: tensor<6xf32>) -> tensor<6xf32> {\n    %m = stablehlo.multiply %a, %b : tensor<6xf32>\n    %s = stablehlo.add %m, %a : tensor<6xf32>\n    return %s : tensor<6xf32>\n  }\n}\n";
    let exe = client.compile(mlir).expect("compiles");
    let a: Vec<f32> = vec![1.0, -2.0, 0.5, 3.0, 1e10, -0.0];
    let b: Vec<f32> = vec![2.0, 4.0, -8.0, 0.25, 1e-10, 7.0];
    let bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<u8>>();
    let dims = [6i64];
    let last = client.devices.len() - 1;
    for device in [0, last] {
        let ba = client
            .buffer_from_host(&bytes(&a), ElementType::F32, &dims, device)
            .unwrap();
        let bb = client
            .buffer_from_host(&bytes(&b), ElementType::F32, &dims, device)
            .unwrap();
        let out = exe.execute(&[&ba, &bb], Some(device), &client).unwrap();
        out.ready().unwrap();
        let mut host = vec![0u8; 24];
        out.to_host(&mut host).unwrap();
        let got: Vec<f32> = host
            .chunks_exact(4)
            .map(|c| f32::from_ne_bytes(c.try_into().unwrap()))
            .collect();
        let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x * y + x).collect();
        assert_eq!(got, want, "device {device}");
    }
}

#[test]
fn errors_come_back_as_values_with_the_plugins_code_and_message() {
    let Some(client) = cpu_client("errors_come_back_as_values") else {
        return;
    };
    // Not MLIR at all: the plugin says why (INVALID_ARGUMENT or similar), no crash.
    let e = client
        .compile("this is not a program")
        .err()
        .expect("refused");
    assert!(e.code != 0 && !e.message.is_empty(), "{e:?}");
    // Host data that does not match the dims is refused here, before PJRT sees it.
    let e = client
        .buffer_from_host(&[0u8; 8], ElementType::F32, &[3], 0)
        .err()
        .expect("refused");
    assert!(e.message.contains("8 bytes"), "{e}");
    // A file that is not a plugin: dlopen's reason.
    let e = Api::load(std::path::Path::new("/nonexistent/plugin.so"))
        .err()
        .expect("refused");
    assert!(
        e.message.contains("/nonexistent/plugin.so") || e.message.contains("No such file"),
        "{e}"
    );
}
