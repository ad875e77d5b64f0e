//! The `wheelfix` command: the command line parsed into a request, the command run
//! ([`wheelfix::cmd::run`]), its output printed, its exit code returned.

mod cli;

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

use cli::{Cli, Run};
use wheelfix::cmd;

fn main() -> ExitCode {
    wheelfix::parallel::fix_allocator_thresholds();
    let cli = Cli::parse();
    if let Err(e) = wheelfix::parallel::start_pool() {
        eprintln!("wheelfix: error: {e}");
        return ExitCode::from(e.exit_code());
    }
    wheelfix::log::set_verbose(cli.verbose);
    wheelfix::output::install_signal_cleanup();
    let command = match cli.command.into_run() {
        Run::Command(command) => *command,
        Run::Completions(shell) => {
            use clap::CommandFactory;
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "wheelfix", &mut out);
            print(&cmd::Output { stdout: String::from_utf8_lossy(&out).into_owned(), ..cmd::Output::default() });
            return ExitCode::SUCCESS;
        }
        Run::Manpages(dir) => {
            return match write_manpages(&dir) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("wheelfix: error: {}: {e}", dir.display());
                    ExitCode::FAILURE
                }
            };
        }
    };
    let output = cmd::run(command);
    print(&output);
    ExitCode::from(output.code)
}

/// The man pages of `wheelfix` and of each visible subcommand, from the same definitions as
/// `--help`, so they cannot disagree with it.
fn write_manpages(dir: &std::path::Path) -> std::io::Result<()> {
    use clap::CommandFactory;
    std::fs::create_dir_all(dir)?;
    let top = Cli::command().version(env!("CARGO_PKG_VERSION"));
    let mut pages = vec![("wheelfix".to_string(), top.clone())];
    for sub in top.get_subcommands().filter(|c| !c.is_hide_set() && c.get_name() != "help") {
        let name = format!("wheelfix-{}", sub.get_name());
        let bin_name = format!("wheelfix {}", sub.get_name());
        let mut page = sub.clone().display_name(name.clone()).bin_name(bin_name);
        // A command with a `--version` of its own (selector's) keeps it; the others name ours.
        if !sub.get_arguments().any(|a| a.get_id() == "version") {
            page = page.version(env!("CARGO_PKG_VERSION"));
        }
        pages.push((name, page));
    }
    for (name, command) in pages {
        let mut out = Vec::new();
        clap_mangen::Man::new(command).render(&mut out)?;
        std::fs::write(dir.join(format!("{name}.1")), out)?;
    }
    Ok(())
}

/// Print a command's output: stdout (a closed pipe, as with `| head`, is not an error), then
/// its stderr lines.
fn print(output: &cmd::Output) {
    let mut stdout = std::io::stdout().lock();
    let text = wheelfix::cmd::escape_text(&output.stdout);
    if let Err(e) = stdout.write_all(text.as_bytes()).and_then(|_| stdout.flush())
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        eprintln!("wheelfix: error: cannot write output: {e}");
    }
    for line in &output.stderr {
        eprintln!("{}", wheelfix::cmd::escape_text(line));
    }
}
