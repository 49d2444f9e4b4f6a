//! Child processes that leave with their parent: the kernel sends them SIGTERM when the thread
//! that spawned them exits (`PR_SET_PDEATHSIG`, Linux), so that a parent killed without running
//! its destructors (SIGKILL) leaves no role process or private redis-server behind.
//!
//! The signal follows the spawning *thread*, not the process: spawn such children from a
//! thread that lives as long as the process (the main thread, a runtime's worker), never from
//! a pool thread that may retire (`spawn_blocking`).

use std::process::Command;

/// Makes `cmd`'s child get SIGTERM when the spawning thread exits. A parent that died before
/// the child could ask (the child already reparented, so no signal would ever come) makes the
/// spawn fail with ESRCH ("no such process"). Elsewhere than on Linux this does nothing.
#[cfg(target_os = "linux")]
pub fn stop_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs in the child between fork and exec and calls only prctl and
    // getppid, which are async-signal-safe; it allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}

/// Elsewhere a child outlives a parent killed with SIGKILL.
#[cfg(not(target_os = "linux"))]
pub fn stop_with_parent(_cmd: &mut Command) {}

/// Whether the calling thread is the process's main thread (its thread id is the process id),
/// the one thread sure to live as long as the process: where [`stop_with_parent`] children may
/// be spawned without knowing more of the caller. Elsewhere than on Linux: false.
pub fn on_main_thread() -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid(2) and getpid(2) take nothing and cannot fail.
        unsafe { libc::gettid() == libc::getpid() }
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_the_main_thread_is_the_main_thread() {
        // Test functions run on threads of the harness; a thread spawned here is surely not main.
        assert!(!std::thread::spawn(super::on_main_thread).join().unwrap());
        #[cfg(target_os = "linux")]
        {
            // The process's first thread has the process's id as its thread id.
            let main_tid = std::fs::read_dir("/proc/self/task")
                .unwrap()
                .flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
                .min()
                .unwrap();
            assert_eq!(main_tid, std::process::id());
        }
    }
}
