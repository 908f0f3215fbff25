//! The loopback-only network namespace agent hosts run in.
//!
//! [`enter`] moves the calling process — which must still be single-threaded, before any runtime
//! starts — into a new network namespace (as root, or through an unprivileged user namespace
//! mapping the caller's uid), brings `lo` up and then [`verify`]s the result: one link, `lo`, no
//! IPv4 route, and IPv6 routes through `lo` only. Everything started afterwards (the model stub,
//! the servers, the proxies, the host) inherits the namespace, so nothing can leave the machine.

use std::fmt;

/// Why the sandbox could not be set up or is not loopback-only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused(pub String);

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "refusing to start an agent host outside a loopback-only network namespace: {}",
            self.0
        )
    }
}

impl std::error::Error for Refused {}

/// What a namespace looks like, read from `/proc/self/net` (which, unlike `/sys/class/net`,
/// always shows the calling process's own namespace).
#[derive(Debug, Clone, Default)]
pub struct NetView {
    /// `/proc/self/net/dev`.
    pub dev: String,
    /// `/proc/self/net/route`.
    pub route: String,
    /// `/proc/self/net/ipv6_route` (empty when IPv6 is off).
    pub ipv6_route: String,
}

impl NetView {
    /// The calling process's namespace.
    pub fn current() -> Result<NetView, Refused> {
        let read = |name: &str| {
            std::fs::read_to_string(format!("/proc/self/net/{name}"))
                .map_err(|e| Refused(format!("cannot read /proc/self/net/{name}: {e}")))
        };
        Ok(NetView {
            dev: read("dev")?,
            route: read("route")?,
            ipv6_route: read("ipv6_route").unwrap_or_default(),
        })
    }

    /// The network interfaces, from `dev`.
    pub fn links(&self) -> Vec<String> {
        self.dev
            .lines()
            .filter_map(|line| line.split_once(':'))
            .map(|(name, _)| name.trim().to_string())
            .filter(|name| !name.is_empty() && !name.contains('|'))
            .collect()
    }
}

/// Checks that a namespace has loopback alone: `lo` its only link, no IPv4 route, every IPv6
/// route through `lo`.
pub fn verify(view: &NetView) -> Result<(), Refused> {
    let links = view.links();
    if links != ["lo"] {
        return Err(Refused(format!(
            "the network namespace has the links {} (only lo is allowed)",
            links.join(", ")
        )));
    }
    let routes: Vec<&str> = view
        .route
        .lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .collect();
    if let Some(route) = routes.first() {
        return Err(Refused(format!(
            "the network namespace has {} IPv4 route(s), e.g. via {}",
            routes.len(),
            route.split_whitespace().next().unwrap_or("?")
        )));
    }
    if let Some(route) = view
        .ipv6_route
        .lines()
        .find(|l| l.split_whitespace().last().is_some_and(|dev| dev != "lo"))
    {
        return Err(Refused(format!(
            "the network namespace has an IPv6 route via {}",
            route.split_whitespace().last().unwrap_or("?")
        )));
    }
    Ok(())
}

/// Checks the calling process's own namespace.
pub fn verify_current() -> Result<(), Refused> {
    verify(&NetView::current()?)
}

/// Moves this process into a new, loopback-only network namespace and checks it.
///
/// Call it before any other thread exists (`unshare` of a user namespace needs a
/// single-threaded caller, and threads started earlier would stay outside).
#[cfg(target_os = "linux")]
pub fn enter() -> Result<(), Refused> {
    // SAFETY: getuid/getgid never fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    // SAFETY: unshare(2) with flags only; on failure nothing changed.
    let as_root = unsafe { libc::unshare(libc::CLONE_NEWNET) } == 0;
    if !as_root {
        let root_error = std::io::Error::last_os_error();
        // SAFETY: as above.
        if unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) } != 0 {
            let user_error = std::io::Error::last_os_error();
            return Err(Refused(format!(
                "cannot create a network namespace (as this user: {root_error}; in a user \
                 namespace: {user_error}); run as root, or enable unprivileged user namespaces \
                 (sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces > 0, and on \
                 Ubuntu kernel.apparmor_restrict_unprivileged_userns=0)"
            )));
        }
        map_ids(uid, gid)?;
    }
    loopback_up()?;
    verify_current()
}

/// `argv` run as the first process of a PID namespace of its own (util-linux `unshare --pid
/// --fork --kill-child`): when it ends, or is killed with its cell, the kernel kills every
/// process it started, daemons that left its process group included, so none outlives its cell
/// or is shared by the next. Where a PID namespace cannot be made (no `unshare`, no privilege),
/// `argv` as it is and why not.
pub fn own_pid_namespace(argv: Vec<String>) -> (Vec<String>, Option<String>) {
    static WORKS: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    let works = WORKS.get_or_init(|| {
        let probe = std::process::Command::new("unshare")
            .args(["--pid", "--fork", "--kill-child", "true"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .output();
        match probe {
            Ok(out) if out.status.success() => Ok(()),
            Ok(out) => Err(format!(
                "unshare --pid failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )),
            Err(e) => Err(format!("cannot run unshare (util-linux): {e}")),
        }
    });
    match works {
        Ok(()) => {
            let mut wrapped: Vec<String> = ["unshare", "--pid", "--fork", "--kill-child", "--"]
                .iter()
                .map(|s| s.to_string())
                .collect();
            wrapped.extend(argv);
            (wrapped, None)
        }
        Err(why) => (argv, Some(why.clone())),
    }
}

/// Not Linux: no network namespaces, so no host may run.
#[cfg(not(target_os = "linux"))]
pub fn enter() -> Result<(), Refused> {
    Err(Refused(
        "network namespaces exist only on Linux; agent hosts run only there".into(),
    ))
}

#[cfg(target_os = "linux")]
fn map_ids(uid: libc::uid_t, gid: libc::gid_t) -> Result<(), Refused> {
    let write = |path: &str, text: String| {
        std::fs::write(path, text).map_err(|e| Refused(format!("cannot write {path}: {e}")))
    };
    write("/proc/self/uid_map", format!("{uid} {uid} 1\n"))?;
    write("/proc/self/setgroups", "deny\n".into())?;
    write("/proc/self/gid_map", format!("{gid} {gid} 1\n"))
}

#[cfg(target_os = "linux")]
fn loopback_up() -> Result<(), Refused> {
    // SAFETY: a plain datagram socket, closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(Refused(format!(
            "cannot open a socket to bring lo up: {}",
            std::io::Error::last_os_error()
        )));
    }
    // SAFETY: ifreq is plain data; zeroed is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS/SIOCSIFFLAGS read and write `req`, which lives across both calls.
    let result = unsafe {
        if libc::ioctl(fd, libc::SIOCGIFFLAGS as _, &mut req) != 0 {
            Err(std::io::Error::last_os_error())
        } else {
            req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
            if libc::ioctl(fd, libc::SIOCSIFFLAGS as _, &req) != 0 {
                Err(std::io::Error::last_os_error())
            } else {
                Ok(())
            }
        }
    };
    // SAFETY: fd is ours.
    unsafe { libc::close(fd) };
    result.map_err(|e| Refused(format!("cannot bring lo up: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEV_HEAD: &str = "Inter-|   Receive                                                |  Transmit\n face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n";
    const ROUTE_HEAD: &str =
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n";

    fn lo_only() -> NetView {
        NetView {
            dev: format!("{DEV_HEAD}    lo:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0\n"),
            route: ROUTE_HEAD.into(),
            ipv6_route: "00000000000000000000000000000001 80 00000000000000000000000000000000 00 00000000000000000000000000000000 00000000 00000002 00000000 80200001       lo\n".into(),
        }
    }

    #[test]
    fn loopback_alone_passes() {
        assert_eq!(verify(&lo_only()), Ok(()));
    }

    #[test]
    fn another_link_a_route_or_an_ipv6_route_is_refused() {
        let mut view = lo_only();
        view.dev
            .push_str("  eth0: 1 2 0 0 0 0 0 0 3 4 0 0 0 0 0 0\n");
        let err = verify(&view).expect_err("eth0");
        assert!(err.0.contains("eth0"), "{err}");

        let mut view = lo_only();
        view.route
            .push_str("eth0\t00000000\t0101A8C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n");
        let err = verify(&view).expect_err("default route");
        assert!(err.0.contains("IPv4 route"), "{err}");

        let mut view = lo_only();
        view.ipv6_route.push_str("fe800000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth0\n");
        let err = verify(&view).expect_err("ipv6 route");
        assert!(err.0.contains("IPv6 route via eth0"), "{err}");
    }

    /// The namespace the tests run in — the machine's own, with its links and routes — is not a
    /// sandbox. (Skipped where the tests themselves run inside a loopback-only namespace.)
    #[test]
    fn the_machines_own_namespace_is_refused() {
        let view = NetView::current().expect("readable /proc/self/net");
        let has_route = view.route.lines().skip(1).any(|l| !l.trim().is_empty());
        if has_route {
            let err = verify(&view).expect_err("the machine's namespace has a route");
            assert!(err.to_string().contains("refusing"), "{err}");
        } else {
            assert_eq!(view.links(), ["lo"], "no route but other links: {view:?}");
        }
    }
}
