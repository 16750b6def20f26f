import { readFileSync } from "node:fs";
import { configVariables, currentReadmeSection, readmePath, renderConfigReference } from "./config-reference";

describe("configuration reference", () => {
  test("when a process reads a variable, then the README's configuration table documents it as the schema says", () => {
    const section = currentReadmeSection(readFileSync(readmePath, "utf8"));
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
