import { readFileSync } from "node:fs";
import {
  configVariables,
  currentReferenceSection,
  referencePath,
  renderConfigReference,
} from "./config-reference";

describe("configuration reference", () => {
  test("when a process reads a variable, then docs/configuration.md's table documents it as the schema says", () => {
    const section = currentReferenceSection(readFileSync(referencePath, "utf8"));
    // Regenerate with: npx tsx test/platform/config-reference.ts --write
    expect(section).toBe(renderConfigReference());
  });

  test("when a variable is read, then its schema says what it means", () => {
    const undocumented = [...configVariables().values()]
      .filter(({ variable }) => variable.description.trim() === "")
      .map(({ variable }) => variable.name);
    expect(undocumented).toEqual([]);
  });
});
