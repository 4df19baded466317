//! Overload protection (`--max-cpu-load`, `--min-free-memory`), as DolphinScheduler's
//! masters have it: while the host's load is above the limit or its available memory below
//! the reserve, this master claims no new commands. The instances it runs go on; other
//! masters, or this one once the host recovers, take the commands.

use shoal_common::metrics;
use shoal_common::registry::Membership;
use std::time::Duration;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// How often the host is measured.
const EVERY: Duration = Duration::from_secs(2);

/// The limits; both None (the default) turns the protection off.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Limits {
    /// Highest 1-minute load average (as `uptime` shows it) at which commands are claimed.
    pub max_cpu_load: Option<f64>,
    /// Fewest bytes of available memory (`MemAvailable`) at which commands are claimed.
    pub min_free_memory: Option<u64>,
}

/// What the limits are compared with.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Host {
    load: f64,
    available: u64,
}

impl Limits {
    fn is_off(&self) -> bool {
        self.max_cpu_load.is_none() && self.min_free_memory.is_none()
    }

    /// Why `host` is overloaded, or None when it is not.
    fn exceeded(&self, host: Host) -> Option<String> {
        if let Some(max) = self.max_cpu_load.filter(|&max| host.load > max) {
            return Some(format!(
                "load average {:.2} is above --max-cpu-load {max}",
                host.load
            ));
        }
        self.min_free_memory
            .filter(|&min| host.available < min)
            .map(|min| {
                format!(
                    "available memory {} is below --min-free-memory {}",
                    bytesize::ByteSize::b(host.available),
                    bytesize::ByteSize::b(min)
                )
            })
    }
}

/// Watches the host against `limits`: the receiver holds why this master is overloaded
/// (None while it is not), which its registry entry and `shoal_master_overloaded` show too.
/// The first measurement is taken before it returns, so that no claim precedes it.
pub(crate) fn watch(
    limits: Limits,
    membership: &Membership,
    shutdown: CancellationToken,
) -> watch::Receiver<Option<String>> {
    let (tx, rx) = watch::channel(None);
    if limits.is_off() {
        return rx;
    }
    let membership = membership.clone();
    let mut unmeasurable = false;
    let mut check = move || {
        let reason = match measure() {
            Ok(host) => limits.exceeded(host),
            Err(e) => {
                if !std::mem::replace(&mut unmeasurable, true) {
                    warn!(error = %e, "cannot measure the host's load and memory; claiming as usual");
                }
                None
            }
        };
        if *tx.borrow() != reason {
            match &reason {
                Some(why) => warn!(reason = %why, "master overloaded: claiming no new commands"),
                None => info!("master no longer overloaded: claiming commands again"),
            }
            metrics::MASTER_OVERLOADED.set(i64::from(reason.is_some()));
            membership.update(|n| n.overloaded = reason.clone());
            tx.send_replace(reason);
        }
    };
    check();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(EVERY) => check(),
            }
        }
    });
    rx
}

/// The host's 1-minute load average and available memory, from Linux's /proc.
fn measure() -> std::io::Result<Host> {
    let loadavg = std::fs::read_to_string("/proc/loadavg")?;
    let meminfo = std::fs::read_to_string("/proc/meminfo")?;
    parse(&loadavg, &meminfo).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "/proc/loadavg or /proc/meminfo has no load average or MemAvailable",
        )
    })
}

fn parse(loadavg: &str, meminfo: &str) -> Option<Host> {
    let load = loadavg.split_whitespace().next()?.parse().ok()?;
    let kib: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()?;
    Some(Host {
        load,
        available: kib * 1024,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_files_give_the_load_and_available_memory() {
        let host = parse(
            "3.52 2.10 1.00 2/345 6789\n",
            "MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:    2048 kB\n",
        );
        assert_eq!(
            host,
            Some(Host {
                load: 3.52,
                available: 2048 * 1024
            })
        );
        assert_eq!(parse("", "MemAvailable: 1 kB"), None);
        assert_eq!(parse("1.0 1.0 1.0", "MemFree: 1 kB"), None);
    }

    #[test]
    fn a_limit_crossed_says_which_and_by_how_much() {
        let host = Host {
            load: 3.5,
            available: 512 * 1024 * 1024,
        };
        let cpu = Limits {
            max_cpu_load: Some(2.0),
            min_free_memory: None,
        };
        assert_eq!(
            cpu.exceeded(host).as_deref(),
            Some("load average 3.50 is above --max-cpu-load 2")
        );
        let memory = Limits {
            max_cpu_load: Some(8.0),
            min_free_memory: Some(1024 * 1024 * 1024),
        };
        let why = memory.exceeded(host).expect("below the reserve");
        assert!(why.starts_with("available memory 512"), "{why}");
        assert!(why.contains("below --min-free-memory 1"), "{why}");
        let roomy = Limits {
            max_cpu_load: Some(4.0),
            min_free_memory: Some(1024),
        };
        assert_eq!(roomy.exceeded(host), None);
        assert!(Limits::default().is_off());
    }
}
