import ast
import os
import subprocess
import sys
import time

import pytest

from kernelwarden_gateway import launch


def test_boot_ipykernel_replaces_the_launcher_module_with_the_boot():
    cmd, booted = launch.boot_ipykernel(["python", "-m", "ipykernel_launcher", "-f", "c.json"], True)
    assert booted
    assert cmd[:2] == ["python", "-c"]
    assert cmd[3:] == ["-f", "c.json"]
    assert cmd[2].splitlines()[0] == "_kw_drop_safepath = True"
    assert cmd[2].endswith(launch.boot_text())
    ast.parse(cmd[2])


def test_boot_ipykernel_says_whether_to_drop_pythonsafepath():
    cmd, _ = launch.boot_ipykernel(["python", "-m", "ipykernel_launcher"], False)
    assert cmd[2].splitlines()[0] == "_kw_drop_safepath = False"


def test_boot_ipykernel_leaves_other_commands_alone():
    assert launch.boot_ipykernel(["R", "-e", "x"], True) == (["R", "-e", "x"], False)
    assert launch.boot_ipykernel(["python", "-m", "other"], True) == (["python", "-m", "other"], False)
    assert launch.boot_ipykernel(["python", "-m"], True) == (["python", "-m"], False)


def test_safe_r_adds_the_flags_right_after_r():
    cmd = ["/usr/bin/R", "--slave", "-e", "IRkernel::main()", "--args", "c.json"]
    assert launch.safe_r(cmd) == [
        "/usr/bin/R",
        "--no-init-file",
        "--no-environ",
        "--no-restore",
        "--slave",
        "-e",
        "IRkernel::main()",
        "--args",
        "c.json",
    ]


def test_safe_r_does_not_repeat_a_flag_already_given():
    assert launch.safe_r(["R", "--no-restore", "-e", "IRkernel::main()"]) == [
        "R",
        "--no-init-file",
        "--no-environ",
        "--no-restore",
        "-e",
        "IRkernel::main()",
    ]


def test_safe_r_leaves_commands_without_irkernel_or_r_alone():
    assert launch.safe_r(["python", "-m", "ipykernel_launcher"]) == ["python", "-m", "ipykernel_launcher"]
    assert launch.safe_r(["Rscript", "-e", "IRkernel::main()"]) == ["Rscript", "-e", "IRkernel::main()"]


def test_launch_command_sets_pythonsafepath_for_the_boot_only_when_the_requester_did_not():
    cmd, env = launch.launch_command(["python", "-m", "ipykernel_launcher"], {"A": "1"})
    assert env == {"A": "1", "PYTHONSAFEPATH": "1"}
    assert cmd[2].startswith("_kw_drop_safepath = True\n")
    cmd, env = launch.launch_command(["python", "-m", "ipykernel_launcher"], {"PYTHONSAFEPATH": "x"})
    assert env == {"PYTHONSAFEPATH": "x"}
    assert cmd[2].startswith("_kw_drop_safepath = False\n")
    cmd, env = launch.launch_command(["R", "-e", "IRkernel::main()"], {"A": "1"})
    assert env == {"A": "1"}
    assert cmd[1:4] == list(launch.R_SAFE_FLAGS)


def test_launch_command_does_not_change_the_environment_it_is_given():
    given = {"A": "1"}
    launch.launch_command(["python", "-m", "ipykernel_launcher"], given)
    assert given == {"A": "1"}


@pytest.mark.parametrize(
    ("kernel_id", "safe"),
    [
        ("0f3c2d4e-1111-4222-8333-444455556666", True),
        ("abc", True),
        ("", False),
        (None, False),
        ("../x", False),
        ("a/b", False),
        ("a b", False),
        ("a" * 64, True),
        ("a" * 65, False),
    ],
)
def test_safe_id(kernel_id, safe):
    assert launch.safe_id(kernel_id) is safe


def test_kill_marked_kills_every_process_carrying_the_marker_and_no_other():
    value = "test%d:%d" % (os.getpid(), time.monotonic_ns())
    env = dict(os.environ, **{launch.MARKER_ENV: value})
    marked = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env) for _ in range(2)]
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=dict(os.environ))
    try:
        deadline = time.monotonic() + 10
        while sorted(launch.marked_pids(value)) != sorted(p.pid for p in marked) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sorted(launch.marked_pids(value)) == sorted(p.pid for p in marked)
        launch.kill_marked(value)
        for p in marked:
            assert p.wait(10) == -9
        assert other.poll() is None
        assert launch.marked_pids(value) == []
    finally:
        for p in [*marked, other]:
            if p.poll() is None:
                p.kill()
                p.wait()


def test_remove_kernel_cgroups_removes_only_the_kernels_own(tmp_path):
    root = tmp_path / "cgroup"
    server = root / "user.slice" / "server"
    server.mkdir(parents=True)
    own = root / "user.slice" / "kw-lim-k1"
    (own / "kernel").mkdir(parents=True)
    other = root / "user.slice" / "kw-lim-k2"
    other.mkdir()
    unrelated = root / "user.slice" / "k1"
    unrelated.mkdir()
    cgroup_file = tmp_path / "self-cgroup"
    cgroup_file.write_text("0::/user.slice/server\n")
    launch.remove_kernel_cgroups("k1", cgroup_file=str(cgroup_file), root=str(root))
    assert not own.exists()
    assert other.exists()
    assert unrelated.exists()
    assert server.exists()


def test_install_forces_ipc_and_patches_the_provisioner_once():
    from traitlets.config import Config

    c = Config()
    launch.install(launch.Settings("inst", "/ipc", "/logs"), c)
    assert c.KernelManager.transport == "ipc"
    provisioner = launch._local.LocalProvisioner
    assert provisioner._kernelwarden_patched
    patched = provisioner.launch_kernel
    launch.install(launch.Settings("inst2", "/ipc2", "/logs2"), Config())
    assert provisioner.launch_kernel is patched
    assert launch._settings.instance == "inst2"
