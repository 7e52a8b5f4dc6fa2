//! A process's `/proc/PID/stat` line (proc(5)), read in one place for the node agent and the
//! sweep engine: the fields they use, counted from after the process's name.

/// The fields of one `stat` line that Libra reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// Field 3: `R`, `S`, `D`, `Z` (ended, not yet reaped), `X` (dead), ...
    pub state: char,
    /// Fields 4 to 6: the parent, the process group and the session.
    pub ppid: i32,
    pub pgrp: i32,
    pub session: i32,
    /// Fields 14 to 17 summed (utime, stime, cutime, cstime): the CPU the process used and what
    /// its reaped children used, in clock ticks.
    pub cpu_ticks: u64,
    /// Fields 16 and 17 (cutime, cstime): what its reaped children used, in clock ticks (part
    /// of `cpu_ticks`).
    pub children_ticks: u64,
    /// Field 22: when the process started, in clock ticks since boot. With the pid it names one
    /// process for good, since pids are reused.
    pub start_ticks: u64,
}

impl Stat {
    /// Parses a `stat` line. The name (`(comm)`) may hold spaces and parentheses, so the fields
    /// are counted from its last `)`.
    pub fn parse(line: &str) -> Option<Stat> {
        let rest = &line[line.rfind(')')? + 1..];
        let f: Vec<&str> = rest.split_whitespace().take(20).collect();
        let int = |i: usize| f.get(i)?.parse::<i64>().ok();
        let tick = |i: usize| f.get(i)?.parse::<u64>().ok();
        let mut state = f.first()?.chars();
        let (Some(state), None) = (state.next(), state.next()) else { return None };
        Some(Stat {
            state,
            ppid: int(1)?.try_into().ok()?,
            pgrp: int(2)?.try_into().ok()?,
            session: int(3)?.try_into().ok()?,
            cpu_ticks: (11..15).try_fold(0u64, |sum, i| sum.checked_add(tick(i)?))?,
            children_ticks: tick(13)?.checked_add(tick(14)?)?,
            start_ticks: tick(19)?,
        })
    }

    /// Process `pid`'s, if it is listed.
    pub fn of(pid: i32) -> Option<Stat> {
        Stat::parse(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
    }

    /// Whether the process has ended (a zombie waiting to be reaped, or dead).
    pub fn ended(&self) -> bool {
        matches!(self.state, 'Z' | 'X' | 'x')
    }
}

/// The kernel's clock ticks per second, the unit of `cpu_ticks` and `start_ticks` (100 on
/// Linux, which a nonsense answer falls back to).
pub fn ticks_per_second() -> f64 {
    // SAFETY: sysconf has no memory effects.
    match unsafe { libc::sysconf(libc::_SC_CLK_TCK) } {
        t if t > 0 => t as f64,
        _ => 100.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_counted_from_the_last_parenthesis_of_the_name() {
        let line = "4242 (a) b) (c) S 1 4242 4240 0 -1 4194560 100 0 0 0 7 3 2 1 20 0 1 0 98765 1000 10 \
                    18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
        let s = Stat::parse(line).unwrap();
        assert_eq!((s.state, s.ppid, s.pgrp, s.session), ('S', 1, 4242, 4240));
        assert_eq!((s.cpu_ticks, s.children_ticks, s.start_ticks), (7 + 3 + 2 + 1, 2 + 1, 98765));
        assert!(!s.ended());
        assert!(Stat::parse(&line.replacen(" S ", " Z ", 1)).unwrap().ended());
        let line = "4242 (a (b) c) R 17 4240 4240 0 -1 4194560 10 0 0 0 150 30 7 3 20 0 1 0 55";
        let s = Stat::parse(line).unwrap();
        assert_eq!((s.ppid, s.pgrp, s.cpu_ticks, s.start_ticks), (17, 4240, 190, 55));
    }

    #[test]
    fn a_short_or_garbled_line_is_not_read() {
        for bad in [
            "",
            "12 (x)",
            "12 (x) S 1 2 3",
            "4242 (truncated",
            "4242 (x) R 17 4240 4240 0 -1 4194560 10 0 0 0 150 30",
            "12 (x) S one 2 3 0 -1 0 0 0 0 0 1 1 1 1 20 0 1 0 5",
            "12 x S 1",
        ] {
            assert_eq!(Stat::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn this_process_reads_as_not_ended_and_started_after_boot() {
        let me = Stat::of(std::process::id() as i32).unwrap();
        assert!(!me.ended(), "{me:?}");
        assert_eq!(me.ppid as u32, std::os::unix::process::parent_id());
        assert!(me.start_ticks > 0);
        assert_eq!(Stat::of(-1), None);
    }
}
