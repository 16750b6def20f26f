import { Command, CommanderError, Option } from "commander";
import { describeFailure, EXIT_OK, EXIT_USAGE } from "./cli-errors";
import { accountCommands } from "./commands/account-commands";
import { authCommands } from "./commands/auth-commands";
import { deviceCommands } from "./commands/device-commands";
import { regionCommands } from "./commands/region-commands";
import { sessionCommands } from "./commands/session-commands";

export function buildProgram(): Command {
  const program = new Command("cgs")
    .description("Rent a cloud game session from the command line.")
    .version("0.1.0")
    .option(
      "--base-url <url>",
      "API origin (over SERVICE_BASE_URL, over the profile's, over https://play.example.com)",
    )
    .addOption(new Option("--profile <name>", "credentials profile").default("default"))
    .option("--json", "print the API's JSON only")
    .showHelpAfterError("(run `cgs --help` for the commands, `cgs COMMAND --help` for one)")
    .exitOverride();
  program.addHelpText(
    "after",
    "\nExit codes: 0 success, 1 API error, 2 usage error, 3 not signed in or session expired, 130 Ctrl-C while waiting in line (the place is kept).\nCredentials: $XDG_CONFIG_HOME/cgs/credentials.json (default ~/.config/cgs).",
  );
  authCommands(program);
  sessionCommands(program);
  regionCommands(program);
  deviceCommands(program);
  accountCommands(program);
  for (const command of program.commands) {
    command.exitOverride();
    for (const sub of command.commands) sub.exitOverride();
  }
  return program;
}

export async function main(argv: string[]): Promise<void> {
  try {
    await buildProgram().parseAsync(argv);
    process.exitCode = EXIT_OK;
  } catch (err) {
    if (err instanceof CommanderError) {
      // Help and --version end through here too, with exit code 0.
      process.exitCode = err.exitCode === 0 ? EXIT_OK : EXIT_USAGE;
      return;
    }
    const { code, line } = describeFailure(err);
    process.stderr.write(`${line}\n`);
    process.exitCode = code;
  }
}
