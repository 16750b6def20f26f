/** One jest run over every workspace; each workspace is a project so `--selectProjects` runs one. */
const base = {
  testEnvironment: "node",
  transform: {
    "^.+\\.ts$": ["ts-jest", { tsconfig: "<rootDir>/../tsconfig.test.json" }],
  },
  moduleNameMapper: {
    "^@cgs/shared$": "<rootDir>/../shared/src/index.ts",
    "^@cgs/shared/dist/(.*)$": "<rootDir>/../shared/src/$1",
    "^@cgs/shared/(.*)$": "<rootDir>/../shared/src/$1",
    "^@cgs/host-agent$": "<rootDir>/../host-agent/src/index.ts",
    "^@cgs/gateway$": "<rootDir>/../gateway/src/index.ts",
    "^@cgs/(sessions|billing|accounts|auth-proxy)$": "<rootDir>/../services/$1/src/index.ts",
    "^@cgs/sdk$": "<rootDir>/../clients/sdk/src/index.ts",
  },
  testMatch: ["<rootDir>/**/*.test.ts"],
  testPathIgnorePatterns: ["/node_modules/", "/dist/"],
};
const project = (name, dir) => {
  const depth = dir.split("/").length;
  const up = "../".repeat(depth);
  const fix = (s) => s.replace("<rootDir>/../", `<rootDir>/${up}`);
  return {
    ...base,
    displayName: name,
    rootDir: `<rootDir>/${dir}`.replace("<rootDir>/", __dirname + "/"),
    transform: { "^.+\\.ts$": ["ts-jest", { tsconfig: fix(base.transform["^.+\\.ts$"][1].tsconfig) }] },
    moduleNameMapper: Object.fromEntries(Object.entries(base.moduleNameMapper).map(([k, v]) => [k, fix(v)])),
  };
};
module.exports = {
  testTimeout: 60_000,
  projects: [
    project("shared", "shared"),
    project("host-agent", "host-agent"),
    project("gateway", "gateway"),
    project("sessions", "services/sessions"),
    project("billing", "services/billing"),
    project("accounts", "services/accounts"),
    project("auth-proxy", "services/auth-proxy"),
    project("infra", "infra"),
    project("test", "test"),
    project("sdk", "clients/sdk"),
    project("cli", "clients/cli"),
  ],
};
