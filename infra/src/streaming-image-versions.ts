/**
 * What the streaming image is built from, pinned in one place: change a line here and the next `pulumi up` builds a
 * new image (the component versions are derived from their content) and rolls it out through a new launch-template
 * default version. The README's "Updating Sunshine, Tailscale, Node.js or the NVIDIA driver" says how.
 */
export const STREAMING_IMAGE_PINS = {
  /** Canonical's current Ubuntu 24.04 LTS AMI for EBS gp3, resolved by Image Builder when a build starts. */
  parentImage: "ssm:/aws/service/canonical/ubuntu/server/24.04/stable/current/amd64/hvm/ebs-gp3/ami-id",
  sunshine: {
    version: "2026.914.233613",
    url: "https://github.com/LizardByte/Sunshine/releases/download/v2026.914.233613/sunshine_2026.914.233613-1%2Bubuntu24.04_amd64.deb",
    /** The release asset's digest as GitHub's release API publishes it; the build refuses any other file. */
    sha256: "c38e9c705f650f8705f61702717e99bec34044c5028fcb8f23a08fe041292c21",
  },
  tailscale: {
    /** The version the private-network peers (Headscale 0.28, tailscaled) are tested with here. */
    version: "1.94.1",
    /** Tailscale's apt signing key (pkgs.tailscale.com); the build checks the downloaded key against it. */
    aptKeyFingerprint: "2596A99EAAB33821893C0A79458CA832957F5868",
  },
  node: {
    version: "24.21.0",
    aptVersion: "24.21.0-1nodesource1",
    /** NodeSource's apt signing key (deb.nodesource.com). */
    aptKeyFingerprint: "6F71F525282841EEDAF851B42F59B5F99B1BE0B4",
  },
  /**
   * AWS's NVIDIA gaming driver (GRID with the vGaming licence EC2 includes): it gives these datacenter GPUs a
   * connected virtual display and NvFBC capture, which the plain datacenter driver does not. Objects under this
   * prefix of the `nvidia-gaming` bucket; name a versioned prefix to pin (see the README).
   */
  nvidiaGamingDriverPrefix: "linux/latest/",
} as const;

export interface GpuFamily {
  gpu: string;
  /** AWS's driver notes: turn off the GPU System Processor firmware on these GPUs with drivers 510 and later. */
  disableGsp: boolean;
}

/** The GPU instance families the image supports; `streaming.instanceType` must be one of them. */
export const GPU_FAMILIES: Record<string, GpuFamily> = {
  g4dn: { gpu: "Tesla T4", disableGsp: true },
  g5: { gpu: "A10G", disableGsp: true },
  g6: { gpu: "L4", disableGsp: false },
};

export function gpuFamilyOf(instanceType: string): string {
  return instanceType.split(".")[0] ?? "";
}
