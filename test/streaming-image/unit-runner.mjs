#!/usr/bin/env node
// A small stand-in for systemd, for the boot tests: there is no systemd to boot here, so this starts the image's
// units the way systemd would order them (After=, Requires=, Wants=), with their Environment=, EnvironmentFile=,
// User=, Group=, ConditionPathExists=, RuntimeDirectory=, StateDirectory=, ExecStartPre=, ExecStart= and
// ExecStartPost=, Type=oneshot (RemainAfterExit=) or simple, and .path units (PathExists=, Unit=). It runs inside the
// test's network and mount namespace, so every process it starts shares the account volume's mount.
//
//   node unit-runner.mjs SPEC.json
// SPEC: { units: [{ name, text }], rewrite: [[from, to]], users: {name: mapped}, groups: {name: mapped},
//         env: {...}, events: path, control: socket path, runtimeRoot: path for /run, stateRoot: path for /var/lib }
// At boot it starts the enabled units (those with WantedBy=), prints one JSON line {units: {name: state}} once they
// have all started or failed, then keeps the services running until its standard input closes, when it stops them.
// Meanwhile it answers `systemctl start|restart|stop|is-active UNIT` on the control socket (stand-ins/systemctl).
import { execFileSync, spawn } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as nodePath from "node:path";

const spec = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const event = (line) => fs.appendFileSync(spec.events, `runner ${line}\n`);
const outputFile = spec.events.replace(/\.log$/, ".output");

function rewrite(text) {
  return spec.rewrite.reduce((t, [from, to]) => t.split(from).join(to), text);
}

/** INI sections of a unit (and its drop-ins, concatenated): key -> every value, in order. */
function parseUnit(text) {
  const keys = {};
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (!line || line.startsWith("#") || line.startsWith("[")) continue;
    const eq = line.indexOf("=");
    const key = line.slice(0, eq);
    (keys[key] ??= []).push(line.slice(eq + 1));
  }
  const words = (key) => (keys[key] ?? []).flatMap((v) => v.split(/\s+/).filter(Boolean));
  return { keys, words, one: (key) => keys[key]?.at(-1) };
}

function envFor(unit) {
  const env = { ...process.env, ...spec.env, CGS_STANDIN_SYSTEMCTL_SOCKET: spec.control };
  for (const entry of unit.keys.EnvironmentFile ?? []) {
    const optional = entry.startsWith("-");
    const file = optional ? entry.slice(1) : entry;
    if (!fs.existsSync(file)) {
      if (optional) continue;
      throw new Error(`EnvironmentFile ${file} is missing`);
    }
    for (const line of fs.readFileSync(file, "utf8").split("\n")) {
      const eq = line.indexOf("=");
      if (eq > 0 && !line.startsWith("#")) env[line.slice(0, eq)] = line.slice(eq + 1);
    }
  }
  for (const assignment of unit.words("Environment")) {
    const eq = assignment.indexOf("=");
    env[assignment.slice(0, eq)] = assignment.slice(eq + 1);
  }
  return env;
}

const userOf = (unit) => spec.users[unit.one("User")] ?? unit.one("User");
const groupOf = (unit) => {
  const group = unit.one("Group") ?? unit.one("User");
  return spec.groups[group] ?? group;
};

/** The command line, run as the unit's (mapped) user and group through setpriv. */
function argv(unit, command) {
  const words = command.split(/\s+/).filter(Boolean);
  if (!unit.one("User")) return words;
  return ["setpriv", `--reuid=${userOf(unit)}`, `--regid=${groupOf(unit)}`, "--init-groups", ...words];
}

/** RuntimeDirectory= and StateDirectory=: made before the unit starts, owned by its user, with the mode given. */
function makeDirectories(unit) {
  const owner = unit.one("User")
    ? {
        uid: Number(execFileSync("id", ["-u", userOf(unit)], { encoding: "utf8" })),
        gid: Number(execFileSync("getent", ["group", groupOf(unit)], { encoding: "utf8" }).split(":")[2]),
      }
    : { uid: 0, gid: 0 };
  for (const [key, root] of [
    ["RuntimeDirectory", spec.runtimeRoot],
    ["StateDirectory", spec.stateRoot],
  ]) {
    const mode = parseInt(unit.one(`${key}Mode`) ?? "0755", 8);
    for (const name of unit.words(key)) {
      const dir = nodePath.join(root, name);
      fs.mkdirSync(dir, { recursive: true });
      fs.chownSync(dir, owner.uid, owner.gid);
      fs.chmodSync(dir, mode);
    }
  }
}

function runToEnd(unit, command, env) {
  const [file, ...args] = argv(unit, command);
  const out = fs.openSync(outputFile, "a");
  fs.writeSync(out, `$ ${command}\n`);
  const child = spawn(file, args, { env, stdio: ["ignore", out, out] });
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill("SIGKILL"), 120_000);
    child.on("error", () => resolve(false));
    child.on("exit", (code) => {
      clearTimeout(timer);
      fs.closeSync(out);
      resolve(code === 0);
    });
  });
}

const parsed = new Map(spec.units.map((u) => [u.name, parseUnit(rewrite(u.text))]));
const names = spec.units.map((u) => u.name);
// inactive, active, failed, dependency-failed, or skipped (a condition was not met: like systemd, not a failure,
// and units that require it still start).
const states = Object.fromEntries(names.map((n) => [n, "inactive"]));
const children = new Map();
const watchers = new Map();
const jobs = new Map();

/** ConditionPathExists=[!]PATH, every one of them must hold. */
function unmetCondition(unit) {
  return (unit.keys.ConditionPathExists ?? []).find((c) =>
    c.startsWith("!") ? fs.existsSync(c.slice(1)) : !fs.existsSync(c),
  );
}

// As systemd does, a unit starts as soon as the units of the same transaction it names in After= have settled, and
// is not started when one of those it also Requires= did not become active; units with no ordering start together.
// Starting a unit pulls in what it Requires= and Wants= (when not active already).
function start(name, transaction = new Set([name]), path = []) {
  if (path.includes(name)) throw new Error(`ordering cycle: ${[...path, name].join(" -> ")}`);
  if (jobs.has(name)) return jobs.get(name);
  if (states[name] === "active") return Promise.resolve();
  const job = activate(name, transaction, [...path, name]).finally(() => jobs.delete(name));
  jobs.set(name, job);
  return job;
}

async function activate(name, transaction, path) {
  const unit = parsed.get(name);
  for (const dep of [...unit.words("Requires"), ...unit.words("Wants")]) {
    if (names.includes(dep) && states[dep] !== "active" && !jobs.has(dep)) transaction.add(dep);
  }
  const after = unit.words("After").filter((n) => transaction.has(n) || jobs.has(n));
  const pulled = [...unit.words("Requires"), ...unit.words("Wants")].filter(
    (n) => transaction.has(n) && !after.includes(n),
  );
  for (const n of pulled) void start(n, transaction, path);
  await Promise.all(after.map((n) => start(n, transaction, path)));
  const settled = (s) => s === "active" || s === "skipped";
  const failedDependency = unit.words("Requires").find((r) => after.includes(r) && !settled(states[r]));
  if (failedDependency) {
    states[name] = "dependency-failed";
    event(`skip ${name} (requires ${failedDependency})`);
    return;
  }
  const condition = unmetCondition(unit);
  if (condition) {
    states[name] = "skipped";
    event(`skip ${name} (condition ${condition})`);
    return;
  }
  event(`start ${name}`);
  if (name.endsWith(".path")) return watch(name, unit);
  let ok = true;
  let remain = true;
  try {
    makeDirectories(unit);
    const env = envFor(unit);
    for (const pre of unit.keys.ExecStartPre ?? []) ok &&= await runToEnd(unit, pre, env);
    if (ok && (unit.one("Type") ?? "simple") === "oneshot") {
      for (const command of unit.keys.ExecStart ?? []) ok &&= await runToEnd(unit, command, env);
      remain = unit.one("RemainAfterExit") === "yes";
    } else if (ok) {
      const [file, ...args] = argv(unit, unit.one("ExecStart"));
      const out = fs.openSync(outputFile, "a");
      const child = spawn(file, args, { env, detached: true, stdio: ["ignore", out, out] });
      children.set(name, child);
      child.on("exit", () => {
        if (children.get(name) === child) {
          children.delete(name);
          if (states[name] === "active") {
            states[name] = "failed";
            event(`exited ${name}`);
          }
        }
      });
      for (const post of unit.keys.ExecStartPost ?? []) ok &&= await runToEnd(unit, post, env);
      if (child.exitCode !== null) ok = false;
    }
  } catch (err) {
    fs.appendFileSync(outputFile, `${name}: ${err.message}\n`);
    ok = false;
  }
  states[name] = ok ? (remain ? "active" : "inactive") : "failed";
  event(`${ok ? (remain ? "active" : "finished") : "failed"} ${name}`);
}

/** A .path unit: starts its unit whenever a PathExists= path exists and that unit is neither active nor starting. */
function watch(name, unit) {
  const target = unit.one("Unit") ?? name.replace(/\.path$/, ".service");
  const paths = unit.keys.PathExists ?? [];
  watchers.set(
    name,
    setInterval(() => {
      const present = paths.find((p) => fs.existsSync(p));
      if (present && states[target] !== "active" && !jobs.has(target)) {
        event(`trigger ${target} (${present})`);
        void start(target);
      }
    }, 100),
  );
  states[name] = "active";
  event(`active ${name}`);
}

async function stop(name) {
  clearInterval(watchers.get(name));
  watchers.delete(name);
  const child = children.get(name);
  children.delete(name);
  if (child && child.exitCode === null) {
    const exited = new Promise((resolve) => child.once("exit", resolve));
    try {
      process.kill(-child.pid, "SIGTERM");
    } catch {
      // already gone
    }
    const timer = setTimeout(() => {
      try {
        process.kill(-child.pid, "SIGKILL");
      } catch {
        // already gone
      }
    }, 5_000);
    await exited;
    clearTimeout(timer);
  }
  if (states[name] !== "inactive") event(`stopped ${name}`);
  states[name] = "inactive";
}

/** systemctl's few verbs the image's scripts use; the exit code as systemctl's. */
async function systemctl([verb, ...units]) {
  const known = units.filter((u) => names.includes(u));
  if (known.length !== units.length || units.length === 0)
    return { code: 5, out: `unit not found: ${units}` };
  event(`systemctl ${verb} ${units.join(" ")}`);
  switch (verb) {
    case "start":
    case "restart":
      for (const u of units) {
        if (verb === "restart") await stop(u);
        await start(u);
      }
      return {
        code: units.every((u) => ["active", "skipped", "inactive"].includes(states[u])) ? 0 : 1,
        out: "",
      };
    case "stop":
      for (const u of units) await stop(u);
      return { code: 0, out: "" };
    case "is-active":
      return {
        code: units.every((u) => states[u] === "active") ? 0 : 3,
        out: units.map((u) => states[u]).join("\n"),
      };
    default:
      return { code: 1, out: `unsupported verb ${verb}` };
  }
}

const control = net.createServer((socket) => {
  let buffer = "";
  socket.on("data", (chunk) => {
    buffer += chunk;
    const newline = buffer.indexOf("\n");
    if (newline < 0) return;
    systemctl(JSON.parse(buffer.slice(0, newline))).then(
      (reply) => socket.end(`${JSON.stringify(reply)}\n`),
      (err) => socket.end(`${JSON.stringify({ code: 1, out: String(err) })}\n`),
    );
  });
  socket.on("error", () => undefined);
});
fs.rmSync(spec.control, { force: true });
await new Promise((resolve) => control.listen(spec.control, resolve));

// The boot: every enabled unit, in one transaction.
const enabled = names.filter((n) => parsed.get(n).words("WantedBy").length > 0);
const boot = new Set(enabled);
await Promise.all(enabled.map((n) => start(n, boot)));
process.stdout.write(`${JSON.stringify({ units: states })}\n`);

const stopAll = async () => {
  control.close();
  const timer = setTimeout(() => process.exit(0), 8_000);
  await Promise.all(names.map((n) => stop(n)));
  clearTimeout(timer);
  process.exit(0);
};
process.stdin.on("end", () => void stopAll());
process.stdin.resume();
process.on("SIGTERM", () => void stopAll());
