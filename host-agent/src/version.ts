/** Reported with every report, so the platform can tell which agents run where. */
export const AGENT_VERSION = "0.1.0";
