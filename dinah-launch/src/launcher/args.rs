//! `dinah-run`'s command line.

use core::fmt;
use std::ffi::OsString;
use std::net::IpAddr;
use std::time::Duration;

use dinah_core::WorldSize;

use super::{
    DEFAULT_INTERRUPT_GRACE, DEFAULT_STARTUP_TIMEOUT, DEFAULT_TIMEOUT, LaunchConfig, MAX_RANKS,
};

/// The text of `dinah-run --help`.
pub const HELP: &str = "\
dinah-run: start N local ranks of a dinah program (like mpirun for dinah's TCP transport)

Usage: dinah-run -n N [OPTIONS] [--] PROGRAM [ARGS...]

Options:
  -n, -np, --np, --ranks N     number of ranks to start (1 to 4096)
  -t, --timeout DURATION       bound on the whole run; ranks still running then are
                               killed and the run fails [default: 10m]
      --startup-timeout DURATION
                               time every rank has to report its address (or exit)
                               [default: 30s, at most --timeout]
      --grace DURATION         after a rank fails, time the others get to exit on
                               their own before they are killed [default: 0s]
      --interrupt-grace DURATION
                               after SIGINT or SIGTERM, which the launcher passes on
                               to every rank, time the ranks get to exit before they
                               are killed (a second signal kills at once; a third
                               ends the launcher) [default: 5s]
      --run-id ID              run ID given to every rank, decimal or 0x-hex
                               [default: random]
  -x, --env NAME=VALUE         set an environment variable in every rank (repeatable)
      --hosts IP[,IP...]       addresses the ranks listen on, dealt out in turn
                               (rank r gets the (r mod count)-th, as DINAH_BIND)
                               [default: 127.0.0.1]
  -v, --verbose                report pids, addresses and exits on stderr
  -h, --help                   print this help
  -V, --version                print the version

DURATION is a whole number with a unit: 250ms, 30s, 5m, 2h (no unit: seconds).

Each rank runs PROGRAM in a process group of its own with DINAH_RANK,
DINAH_WORLD_SIZE, DINAH_RUN_ID, DINAH_LAUNCHER and DINAH_LAUNCH_TIMEOUT_MS in its
environment; dinah_tcp::Membership::from_env() uses them to bind a listener, report
its port to the launcher and receive every rank's address. Output lines are
prefixed with the rank: [0] ...

Exit status: 0 when every rank exited with 0; otherwise the first failing rank's
code, 128+N if it was killed by signal N, 124 on a timeout, 128+N if the launcher
was interrupted by signal N, 2 for a usage error, 1 for any other launch failure.
";

/// A parsed `dinah-run` command line.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cli {
    /// `--help`.
    Help,
    /// `--version`.
    Version,
    /// Launch.
    Run {
        /// What to launch.
        config: LaunchConfig,
        /// Report launcher events on stderr.
        verbose: bool,
    },
}

/// A `dinah-run` command line that does not parse.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgsError {
    /// `-n` is missing.
    MissingRanks,
    /// No program follows the options.
    MissingProgram,
    /// An option needs a value and has none.
    MissingValue {
        /// The option.
        flag: &'static str,
    },
    /// An option's value does not parse.
    InvalidValue {
        /// The option.
        flag: &'static str,
        /// The value given (lossily converted to UTF-8).
        value: String,
    },
    /// An option was given twice.
    Repeated {
        /// The option.
        flag: &'static str,
    },
    /// An option this launcher does not know.
    UnknownOption(String),
}

impl fmt::Display for ArgsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::MissingRanks => f.write_str("the number of ranks is missing (-n N)"),
            Self::MissingProgram => f.write_str("the program to launch is missing"),
            Self::MissingValue { flag } => write!(f, "{flag} needs a value"),
            Self::InvalidValue { flag, value } => write!(f, "invalid value `{value}` for {flag}"),
            Self::Repeated { flag } => write!(f, "{flag} is given more than once"),
            Self::UnknownOption(option) => write!(f, "unknown option `{option}`"),
        }
    }
}

impl core::error::Error for ArgsError {}

impl Cli {
    /// Parses the arguments after the program name.
    ///
    /// Options come first; the first argument that is not an option (or
    /// everything after `--`) is the program and its arguments, passed on
    /// untouched.
    ///
    /// # Errors
    ///
    /// [`ArgsError`] naming the offending option.
    pub fn parse<I, S>(args: I) -> Result<Self, ArgsError>
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        let mut args = args.into_iter().map(Into::into);
        let mut options = Options::default();
        let mut verbose = false;
        let mut program = None;
        while let Some(arg) = args.next() {
            if arg == "--" {
                program = args.next();
                break;
            }
            let Some(text) = arg
                .to_str()
                .filter(|text| text.starts_with('-') && *text != "-")
            else {
                program = Some(arg);
                break;
            };
            let (flag, inline) = split_option(text);
            let mut value = |flag: &'static str| {
                inline
                    .clone()
                    .map(OsString::from)
                    .or_else(|| args.next())
                    .ok_or(ArgsError::MissingValue { flag })
            };
            match flag {
                "-h" | "--help" => return Ok(Self::Help),
                "-V" | "--version" => return Ok(Self::Version),
                "-v" | "--verbose" => verbose = true,
                "-n" | "-np" | "--np" | "--ranks" => {
                    set(&mut options.ranks, "-n", parse_ranks(&value("-n")?)?)?;
                }
                "-t" | "--timeout" => set(
                    &mut options.timeout,
                    "--timeout",
                    parse_duration("--timeout", &value("--timeout")?)?,
                )?,
                "--startup-timeout" => {
                    let flag = "--startup-timeout";
                    set(
                        &mut options.startup_timeout,
                        flag,
                        parse_duration(flag, &value(flag)?)?,
                    )?;
                }
                "--grace" => set(
                    &mut options.grace,
                    "--grace",
                    parse_duration("--grace", &value("--grace")?)?,
                )?,
                "--interrupt-grace" => {
                    let flag = "--interrupt-grace";
                    set(
                        &mut options.interrupt_grace,
                        flag,
                        parse_duration(flag, &value(flag)?)?,
                    )?;
                }
                "--run-id" => set(
                    &mut options.run_id,
                    "--run-id",
                    parse_run_id(&value("--run-id")?)?,
                )?,
                "-x" | "--env" => options.env.push(parse_env(value("--env")?)?),
                "--hosts" => set(
                    &mut options.hosts,
                    "--hosts",
                    parse_hosts(&value("--hosts")?)?,
                )?,
                _ => return Err(ArgsError::UnknownOption(text.to_owned())),
            }
        }
        let ranks = options.ranks.ok_or(ArgsError::MissingRanks)?;
        let program = program.ok_or(ArgsError::MissingProgram)?;
        let mut config = LaunchConfig::new(ranks, program).args(args);
        config.timeout = options.timeout.unwrap_or(DEFAULT_TIMEOUT);
        config.startup_timeout = options.startup_timeout.unwrap_or(DEFAULT_STARTUP_TIMEOUT);
        config.grace = options.grace.unwrap_or(Duration::ZERO);
        config.interrupt_grace = options.interrupt_grace.unwrap_or(DEFAULT_INTERRUPT_GRACE);
        config.run_id = options.run_id;
        config.env = options.env;
        config.hosts = options.hosts.unwrap_or_default();
        Ok(Self::Run { config, verbose })
    }
}

#[derive(Default)]
struct Options {
    ranks: Option<WorldSize>,
    timeout: Option<Duration>,
    startup_timeout: Option<Duration>,
    grace: Option<Duration>,
    interrupt_grace: Option<Duration>,
    run_id: Option<u64>,
    env: Vec<(OsString, OsString)>,
    hosts: Option<Vec<IpAddr>>,
}

fn set<T>(slot: &mut Option<T>, flag: &'static str, value: T) -> Result<(), ArgsError> {
    if slot.replace(value).is_some() {
        Err(ArgsError::Repeated { flag })
    } else {
        Ok(())
    }
}

/// `--flag=value` into (`--flag`, `value`), `-n4` into (`-n`, `4`); `-np`
/// (mpirun's spelling) is a flag of its own.
fn split_option(text: &str) -> (&str, Option<String>) {
    if let Some((flag, value)) = text.split_once('=').filter(|_| text.starts_with("--")) {
        return (flag, Some(value.to_owned()));
    }
    if text == "-np" {
        return (text, None);
    }
    for short in ["-n", "-t", "-x"] {
        if let Some(value) = text.strip_prefix(short).filter(|v| !v.is_empty()) {
            return (
                short,
                Some(value.strip_prefix('=').unwrap_or(value).to_owned()),
            );
        }
    }
    (text, None)
}

fn invalid(flag: &'static str, value: &OsString) -> ArgsError {
    ArgsError::InvalidValue {
        flag,
        value: value.to_string_lossy().into_owned(),
    }
}

fn parse_ranks(value: &OsString) -> Result<WorldSize, ArgsError> {
    value
        .to_str()
        .and_then(|text| text.parse::<u32>().ok())
        .filter(|&n| n <= MAX_RANKS)
        .and_then(|n| WorldSize::new(n).ok())
        .ok_or_else(|| invalid("-n", value))
}

/// Parses `250ms`, `30s`, `5m`, `2h` or a bare number of seconds.
///
/// # Errors
///
/// [`ArgsError::InvalidValue`] for anything else or an overflow.
pub(crate) fn parse_duration(flag: &'static str, value: &OsString) -> Result<Duration, ArgsError> {
    let text = value.to_str().ok_or_else(|| invalid(flag, value))?;
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().map_err(|_| invalid(flag, value))?;
    let seconds_per_unit = match unit {
        "ms" => return Ok(Duration::from_millis(number)),
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        _ => return Err(invalid(flag, value)),
    };
    number
        .checked_mul(seconds_per_unit)
        .map(Duration::from_secs)
        .ok_or_else(|| invalid(flag, value))
}

/// A comma-separated list of IP addresses, at least one.
fn parse_hosts(value: &OsString) -> Result<Vec<IpAddr>, ArgsError> {
    let hosts: Option<Vec<IpAddr>> = value
        .to_str()
        .map(|text| text.split(',').map(|ip| ip.trim().parse().ok()).collect())
        .and_then(|hosts: Option<Vec<IpAddr>>| hosts.filter(|h| !h.is_empty()));
    hosts.ok_or_else(|| invalid("--hosts", value))
}

fn parse_run_id(value: &OsString) -> Result<u64, ArgsError> {
    let text = value.to_str().ok_or_else(|| invalid("--run-id", value))?;
    let parsed = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.map_err(|_| invalid("--run-id", value))
}

/// `NAME=VALUE`, split at the first `=` (on Unix any bytes, elsewhere
/// Unicode text).
fn parse_env(value: OsString) -> Result<(OsString, OsString), ArgsError> {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let bytes = value.as_bytes();
        if let Some(at) = bytes.iter().position(|&b| b == b'=').filter(|&at| at > 0) {
            let name = std::ffi::OsStr::from_bytes(&bytes[..at]).to_owned();
            let val = std::ffi::OsStr::from_bytes(&bytes[at + 1..]).to_owned();
            return Ok((name, val));
        }
    }
    #[cfg(not(unix))]
    if let Some((name, val)) = value
        .to_str()
        .and_then(|text| text.split_once('='))
        .filter(|(name, _)| !name.is_empty())
    {
        return Ok((name.into(), val.into()));
    }
    Err(invalid("--env", &value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, ArgsError> {
        Cli::parse(args.iter().copied())
    }

    fn run(args: &[&str]) -> (LaunchConfig, bool) {
        match parse(args) {
            Ok(Cli::Run { config, verbose }) => (config, verbose),
            other => panic!("expected a run from {args:?}, got {other:?}"),
        }
    }

    #[test]
    fn the_usual_command_line() {
        let (config, verbose) = run(&[
            "-n",
            "4",
            "--timeout",
            "60s",
            "--run-id",
            "7",
            "--",
            "prog",
            "-n",
            "x",
        ]);
        assert_eq!(config.ranks.get(), 4);
        assert_eq!(config.timeout, Duration::from_secs(60));
        assert_eq!(config.startup_timeout, DEFAULT_STARTUP_TIMEOUT);
        assert_eq!(config.grace, Duration::ZERO);
        assert_eq!(config.run_id, Some(7));
        assert_eq!(config.program, "prog");
        assert_eq!(
            config.args,
            ["-n", "x"],
            "everything after the program is the program's"
        );
        assert!(!verbose);
    }

    #[test]
    fn option_spellings() {
        let (config, verbose) = run(&[
            "--ranks=2",
            "-t",
            "5m",
            "--startup-timeout=250ms",
            "--grace",
            "3",
            "--interrupt-grace=1500ms",
            "--run-id=0xff",
            "-x",
            "A=1",
            "--env=B=x=y",
            "-v",
            "prog",
        ]);
        assert_eq!(config.ranks.get(), 2);
        assert_eq!(config.timeout, Duration::from_secs(300));
        assert_eq!(config.startup_timeout, Duration::from_millis(250));
        assert_eq!(config.grace, Duration::from_secs(3));
        assert_eq!(config.interrupt_grace, Duration::from_millis(1500));
        assert_eq!(config.run_id, Some(255));
        assert_eq!(
            config.env,
            [("A".into(), "1".into()), ("B".into(), "x=y".into())]
        );
        assert!(verbose);
        let (config, _) = run(&["-n4", "-t2h", "prog"]);
        assert_eq!(
            (config.ranks.get(), config.timeout),
            (4, Duration::from_secs(7200))
        );
        // mpirun's spellings of the rank count.
        for np in [&["-np", "3"][..], &["--np", "3"], &["--np=3"]] {
            let args: Vec<&str> = np.iter().copied().chain(["prog"]).collect();
            let (config, _) = run(&args);
            assert_eq!(config.ranks.get(), 3, "{np:?}");
        }
        assert_eq!(
            parse(&["-np", "2", "-n", "2", "p"]),
            Err(ArgsError::Repeated { flag: "-n" })
        );
    }

    #[test]
    fn hosts_are_dealt_out_in_turn() {
        let (config, _) = run(&["-n", "5", "--hosts", "127.0.0.2, 127.0.0.3,::1", "prog"]);
        let hosts: Vec<String> = (0..5)
            .map(|rank| config.host_of(rank).unwrap().to_string())
            .collect();
        assert_eq!(
            hosts,
            ["127.0.0.2", "127.0.0.3", "::1", "127.0.0.2", "127.0.0.3"]
        );
        let (config, _) = run(&["-n", "2", "prog"]);
        assert_eq!(config.host_of(0), None, "no --hosts: the loopback default");
        for bad in ["", "127.0.0.2,", "host1", "127.0.0.300"] {
            assert_eq!(
                parse(&["-n", "2", "--hosts", bad, "prog"]),
                Err(ArgsError::InvalidValue {
                    flag: "--hosts",
                    value: bad.to_owned()
                }),
                "{bad:?}"
            );
        }
        assert_eq!(
            parse(&["-n", "2", "--hosts=127.0.0.2", "--hosts", "127.0.0.3", "p"]),
            Err(ArgsError::Repeated { flag: "--hosts" })
        );
    }

    #[test]
    fn defaults_apply_when_options_are_absent() {
        let (config, _) = run(&["-n", "1", "prog"]);
        assert_eq!(config.timeout, DEFAULT_TIMEOUT);
        assert_eq!(config.interrupt_grace, DEFAULT_INTERRUPT_GRACE);
        assert_eq!(config.run_id, None);
        assert!(config.env.is_empty());
        assert!(config.args.is_empty());
    }

    #[test]
    fn help_and_version_win() {
        assert_eq!(parse(&["-h"]), Ok(Cli::Help));
        assert_eq!(parse(&["-n", "2", "--help"]), Ok(Cli::Help));
        assert_eq!(parse(&["--version"]), Ok(Cli::Version));
        // After the program, `--help` belongs to the program.
        let (config, _) = run(&["-n", "1", "prog", "--help"]);
        assert_eq!(config.args, ["--help"]);
    }

    #[test]
    fn errors_name_the_option() {
        assert_eq!(parse(&["prog"]), Err(ArgsError::MissingRanks));
        assert_eq!(parse(&["-n", "2"]), Err(ArgsError::MissingProgram));
        assert_eq!(parse(&["-n", "2", "--"]), Err(ArgsError::MissingProgram));
        assert_eq!(parse(&["-n"]), Err(ArgsError::MissingValue { flag: "-n" }));
        assert_eq!(
            parse(&["-n", "0", "p"]),
            Err(ArgsError::InvalidValue {
                flag: "-n",
                value: "0".into()
            })
        );
        assert_eq!(
            parse(&["-n", "4097", "p"]),
            Err(ArgsError::InvalidValue {
                flag: "-n",
                value: "4097".into()
            })
        );
        assert_eq!(
            parse(&["-n", "two", "p"]),
            Err(ArgsError::InvalidValue {
                flag: "-n",
                value: "two".into()
            })
        );
        assert_eq!(
            parse(&["-n", "1", "-n", "2", "p"]),
            Err(ArgsError::Repeated { flag: "-n" })
        );
        assert_eq!(
            parse(&["--frobnicate", "p"]),
            Err(ArgsError::UnknownOption("--frobnicate".into()))
        );
        for bad in ["10x", "s", "", "-1s", "1.5s", "99999999999999999999h"] {
            assert_eq!(
                parse(&["-n", "1", "--timeout", bad, "p"]),
                Err(ArgsError::InvalidValue {
                    flag: "--timeout",
                    value: bad.into()
                }),
                "{bad}"
            );
        }
        assert_eq!(
            parse(&["-n", "1", "--run-id", "0xzz", "p"]),
            Err(ArgsError::InvalidValue {
                flag: "--run-id",
                value: "0xzz".into()
            })
        );
        for bad in ["NOEQUALS", "=value"] {
            assert_eq!(
                parse(&["-n", "1", "-x", bad, "p"]),
                Err(ArgsError::InvalidValue {
                    flag: "--env",
                    value: bad.into()
                })
            );
        }
    }

    #[test]
    fn durations_parse_with_units() {
        let d = |text: &str| parse_duration("--t", &OsString::from(text));
        assert_eq!(d("0"), Ok(Duration::ZERO));
        assert_eq!(d("0s"), Ok(Duration::ZERO));
        assert_eq!(d("1500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(d("45"), Ok(Duration::from_secs(45)));
        assert_eq!(d("3m"), Ok(Duration::from_secs(180)));
        assert_eq!(d("1h"), Ok(Duration::from_secs(3600)));
        assert!(d("1d").is_err());
    }

    #[test]
    fn the_help_text_documents_every_option() {
        for option in [
            "--ranks",
            "--timeout",
            "--startup-timeout",
            "--grace",
            "--interrupt-grace",
            "--run-id",
            "--env",
            "--verbose",
            "-np",
        ] {
            assert!(HELP.contains(option), "{option}");
        }
        assert!(HELP.contains(&MAX_RANKS.to_string()));
    }

    #[test]
    fn errors_display_what_is_wrong() {
        assert_eq!(
            ArgsError::InvalidValue {
                flag: "-n",
                value: "0".into()
            }
            .to_string(),
            "invalid value `0` for -n"
        );
        assert_eq!(
            ArgsError::MissingRanks.to_string(),
            "the number of ranks is missing (-n N)"
        );
    }
}
