import js from "@eslint/js";
import tseslint from "typescript-eslint";
import globals from "globals";

export default tseslint.config(
  { ignores: ["**/dist/**", "**/node_modules/**", "coverage/**", ".cache/**"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { ...globals.node } },
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
    },
  },
  {
    // A workspace is used through its package entry (@cgs/<name>, mapped to its src/index.ts in tests), never by
    // reaching into another workspace's src/; helpers shared across workspaces live in shared/src/testing or test/.
    files: ["**/*.ts", "**/*.mts", "**/*.js", "**/*.mjs"],
    rules: {
      "no-restricted-imports": [
        "error",
        {
          patterns: [
            {
              regex:
                "^(\\.\\./)+(.+/)?(shared|host-agent|gateway|sessions|billing|accounts|auth-proxy|infra|sdk|cli)/src(/|$)",
              message: "Import another workspace through its package entry (@cgs/<name>), not its src/.",
            },
          ],
        },
      ],
    },
  },
  {
    files: ["**/*.js", "**/*.cjs"],
    rules: { "@typescript-eslint/no-require-imports": "off" },
  },
);
