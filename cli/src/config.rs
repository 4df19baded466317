//! `--config FILE`: a TOML file whose keys are the flags' long names (`database_url` or
//! `database-url`).
//!
//! Precedence is flag > environment > file > default. The file's settings become flags of
//! the subcommand, added to the command line for each setting neither the command line nor
//! the environment gives, so clap does all the parsing and checking. A key that is a flag
//! of another role is skipped (one file can serve a cluster's roles); a key that is no
//! flag at all is an error (a typo). `--dump-config` prints such a file, with `***` in
//! place of secrets, which a file must not pass on as values.

use anyhow::{Context, bail};
use clap::{ArgAction, Command};

use shoal_common::redact::{MASK, is_masked};

/// Refuses a secret on the command line: every user of the machine, and every task a
/// worker runs, can read a process's arguments in `/proc/PID/cmdline` for as long as it
/// runs. The secrets are the flags whose variables `--help` hides (`--token`,
/// `--cluster-secret`, `--secret-key`, a trigger's `--password`), of any command, and a
/// server role's URLs with a password (`--database-url`, `--datasource`); they go in the
/// environment or, for a server, the `--config` file.
pub fn refuse_secrets_in_args(argv: &[String], cli: &Command) -> anyhow::Result<()> {
    let mut command = cli;
    let mut args = argv.iter().skip(1).peekable();
    while let Some(a) = args.next() {
        let Some(flag) = a.strip_prefix("--") else {
            // The subcommand the next flags belong to.
            if let Some(sub) = command.find_subcommand(a) {
                command = sub;
            }
            continue;
        };
        let (long, inline) = match flag.split_once('=') {
            Some((long, value)) => (long, Some(value.to_string())),
            None => (flag, None),
        };
        let Some(arg) = command.get_arguments().find(|x| x.get_long() == Some(long)) else {
            continue;
        };
        let takes_value = !matches!(arg.get_action(), ArgAction::SetTrue | ArgAction::SetFalse);
        let value = match inline {
            Some(v) => v,
            // A flag that follows is not a value (clap says so).
            None if takes_value => match args.next_if(|v| !v.starts_with("--")) {
                Some(v) => v.clone(),
                None => continue,
            },
            None => continue,
        };
        // The server roles are the commands with a configuration to dump.
        let server = (command.get_arguments()).any(|a| a.get_long() == Some("dump-config"));
        let key = long.replace('-', "_");
        if arg.is_hide_env_values_set() {
            let var = arg.get_env().map(|v| v.to_string_lossy().into_owned());
            let var = var.unwrap_or_default();
            let file = match server {
                true => {
                    format!(", or `{key} = \"...\"` in a --config file only shoal's user can read")
                }
                false => String::new(),
            };
            bail!(
                "--{long} on the command line can be read by every user of this machine and \
                 every task (/proc/PID/cmdline): set {var} in the environment instead{file}"
            );
        }
        if !server {
            continue;
        }
        // `--datasource NAME@PROJECTS=URL`
        let url = match long {
            "datasource" => value.split_once('=').map_or("", |(_, url)| url),
            _ => &value,
        };
        if has_password(url) {
            bail!(
                "--{long} holds a password, which on the command line can be read by every \
                 user of this machine and every task (/proc/PID/cmdline): give the URL in a \
                 --config file only shoal's user can read (`{key} = ...`){}",
                match arg.get_env() {
                    Some(var) => format!(", or in {}", var.to_string_lossy()),
                    None => String::new(),
                }
            );
        }
    }
    Ok(())
}

/// Whether `url` holds a password (in the userinfo, or a `password` query parameter).
fn has_password(url: &str) -> bool {
    reqwest::Url::parse(url)
        .is_ok_and(|u| u.password().is_some() || u.query_pairs().any(|(k, _)| k == "password"))
}

/// `argv` with the settings of the `--config` file (or `SHOAL_CONFIG`) added.
pub fn with_config_file(mut argv: Vec<String>, cli: &Command) -> anyhow::Result<Vec<String>> {
    let mut path = None;
    let mut it = argv.iter();
    while let Some(a) = it.next() {
        if a == "--config" {
            path = it.next().cloned();
        } else if let Some(p) = a.strip_prefix("--config=") {
            path = Some(p.to_string());
        }
    }
    let Some(path) = path.or_else(|| std::env::var("SHOAL_CONFIG").ok()) else {
        return Ok(argv);
    };
    let Some(role) = argv.iter().skip(1).find(|a| !a.starts_with('-')).cloned() else {
        return Ok(argv);
    };
    let Some(command) = cli.find_subcommand(&role) else {
        return Ok(argv);
    };
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read config file {path}"))?;
    let table: toml::Table = text
        .parse()
        .with_context(|| format!("config file {path} is not valid TOML"))?;
    let mut added = Vec::new();
    for (key, value) in table {
        let long = key.replace('_', "-");
        let Some(arg) = command
            .get_arguments()
            .find(|a| a.get_long() == Some(long.as_str()))
        else {
            let anywhere = cli.get_subcommands().any(|c| {
                c.get_arguments()
                    .any(|a| a.get_long() == Some(long.as_str()))
            });
            if anywhere {
                continue;
            }
            bail!(
                "config file {path}: '{key}' is not a setting of shoal (see `shoal {role} --help`)"
            );
        };
        let from_env = arg
            .get_env()
            .is_some_and(|var| std::env::var_os(var).is_some());
        let flag = format!("--{long}");
        let given = argv
            .iter()
            .any(|a| *a == flag || a.starts_with(&format!("{flag}=")));
        if from_env || given {
            continue;
        }
        let values = match value {
            toml::Value::Boolean(on) => {
                if on {
                    added.push(flag);
                }
                continue;
            }
            toml::Value::String(s) => vec![s],
            toml::Value::Integer(i) => vec![i.to_string()],
            toml::Value::Float(f) => vec![f.to_string()],
            toml::Value::Array(items) => items
                .iter()
                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
                .collect(),
            other => bail!("config file {path}: '{key}' has an unsupported value {other}"),
        };
        if values.iter().any(|v| is_masked(v)) {
            bail!(
                "config file {path}: '{key}' holds the {MASK} that --dump-config prints in \
                 place of a secret: write the value there, or remove the line and set it in \
                 the environment"
            );
        }
        // A flag given once per value (`--datasource`), or once with a list (`--etcd a,b`).
        if matches!(arg.get_action(), ArgAction::Append) && arg.get_value_delimiter().is_none() {
            for v in values {
                added.extend([flag.clone(), v]);
            }
        } else {
            added.extend([flag, values.join(",")]);
        }
    }
    argv.extend(added);
    Ok(argv)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Arg, ArgAction};

    fn cli() -> Command {
        Command::new("shoal")
            .subcommand(
                Command::new("worker")
                    .arg(Arg::new("port").long("port").env("SHOAL_TEST_CONFIG_PORT"))
                    .arg(Arg::new("slots").long("slots"))
                    .arg(
                        Arg::new("insecure")
                            .long("insecure")
                            .action(ArgAction::SetTrue),
                    )
                    .arg(
                        Arg::new("etcd")
                            .long("etcd")
                            .value_delimiter(',')
                            .action(ArgAction::Append),
                    )
                    .arg(
                        Arg::new("datasource")
                            .long("datasource")
                            .action(ArgAction::Append),
                    )
                    .arg(Arg::new("config").long("config")),
            )
            .subcommand(Command::new("master").arg(Arg::new("database-url").long("database-url")))
    }

    fn with(file: &str, args: &[&str]) -> anyhow::Result<Vec<String>> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shoal.toml");
        std::fs::write(&path, file).unwrap();
        let mut argv: Vec<String> = ["shoal", "worker", "--config", path.to_str().unwrap()]
            .map(String::from)
            .to_vec();
        argv.extend(args.iter().map(|a| a.to_string()));
        with_config_file(argv, &cli()).map(|a| a[4..].to_vec())
    }

    #[test]
    fn settings_become_flags_unless_given() {
        let file = "slots = 8\ninsecure = true\netcd = ['http://a:2379', 'http://b:2379']\n\
                    datasource = ['x=sqlite://x', 'y=sqlite://y']\ndatabase_url = 'postgres://h/db'\n";
        assert_eq!(
            with(file, &[]).unwrap(),
            [
                "--datasource",
                "x=sqlite://x",
                "--datasource",
                "y=sqlite://y",
                "--etcd",
                "http://a:2379,http://b:2379",
                "--insecure",
                "--slots",
                "8",
            ]
        );
        // The command line wins; a key of another role is left to it.
        assert_eq!(with("slots = 8\n", &["--slots=2"]).unwrap(), ["--slots=2"]);
        assert_eq!(
            with("insecure = false\n", &[]).unwrap(),
            Vec::<String>::new()
        );
    }

    #[test]
    fn secrets_on_a_server_s_command_line_are_refused() {
        let cli = cli()
            .mut_subcommand("worker", |c| {
                c.arg(
                    Arg::new("dump-config")
                        .long("dump-config")
                        .action(ArgAction::SetTrue),
                )
                .arg(
                    Arg::new("token")
                        .long("token")
                        .env("SHOAL_TEST_TOKEN")
                        .hide_env_values(true),
                )
            })
            .subcommand(
                Command::new("start").arg(
                    Arg::new("token")
                        .long("token")
                        .env("SHOAL_TOKEN")
                        .hide_env_values(true),
                ),
            )
            .subcommand(
                Command::new("trigger").subcommand(
                    Command::new("call")
                        .arg(Arg::new("target"))
                        .arg(Arg::new("user").long("user"))
                        .arg(
                            Arg::new("password")
                                .long("password")
                                .env("SHOAL_TRIGGER_PASSWORD")
                                .hide_env_values(true),
                        ),
                ),
            );
        let check = |args: &[&str]| {
            let argv: Vec<String> = ["shoal"]
                .iter()
                .chain(args)
                .map(|a| a.to_string())
                .collect();
            refuse_secrets_in_args(&argv, &cli).map_err(|e| e.to_string())
        };
        for given in [&["worker", "--token", "t"][..], &["worker", "--token=t"]] {
            let e = check(given).unwrap_err();
            assert!(
                e.starts_with("--token on the command line") && e.contains("SHOAL_TEST_TOKEN"),
                "{e}"
            );
        }
        let e = check(&["worker", "--datasource", "w=postgres://u:pw@h/db"]).unwrap_err();
        assert!(e.starts_with("--datasource holds a password"), "{e}");
        // No password, or another flag's value: nothing refused.
        check(&[
            "worker",
            "--datasource",
            "w=postgres://u@h/db",
            "--slots",
            "2",
        ])
        .unwrap();
        check(&["worker", "--port", "--token", "t"]).unwrap_err();
        // A client's token too, in a nested command, with only the variable to suggest.
        let e = check(&["start", "--token", "t"]).unwrap_err();
        assert!(
            e.ends_with("set SHOAL_TOKEN in the environment instead"),
            "{e}"
        );
        let e = check(&["trigger", "call", "p/w/t", "--password=pw"]).unwrap_err();
        assert!(
            e.starts_with("--password on the command line") && e.contains("SHOAL_TRIGGER_PASSWORD"),
            "{e}"
        );
        check(&["trigger", "call", "p/w/t", "--user", "u"]).unwrap();
    }

    #[test]
    fn a_key_that_is_no_setting_is_refused() {
        let e = with("slotz = 8\n", &[]).unwrap_err().to_string();
        assert!(e.contains("'slotz' is not a setting"), "{e}");
        let e = with("slots = [", &[]).unwrap_err().to_string();
        assert!(e.contains("not valid TOML"), "{e}");
    }

    #[test]
    fn a_masked_secret_from_dump_config_is_refused_not_taken_as_the_value() {
        for file in [
            "slots = '***'\n",
            "datasource = ['x=sqlite://x', 'w=postgres://u:***@h/db']\n",
            "datasource = ['w=postgres://u@h/db?password=***']\n",
        ] {
            let e = with(file, &[]).unwrap_err().to_string();
            assert!(e.contains("holds the *** that --dump-config prints"), "{e}");
        }
        // A password that merely contains stars is a value.
        let file = "datasource = ['w=postgres://u:a***b@h/db']\n";
        assert_eq!(
            with(file, &[]).unwrap(),
            ["--datasource", "w=postgres://u:a***b@h/db"]
        );
    }
}
