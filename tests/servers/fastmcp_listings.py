"""FastMCP stdio server "listings" whose tools say nothing of what they list: only its
initialize `instructions` do. `lodging` (homestays) or `jobs` (job offers), for tool search."""
import sys

from fastmcp import FastMCP

INSTRUCTIONS = {"lodging": "Find homestays and holiday apartments to rent.",
                "jobs": "Job offers from company career pages."}


def build(kind: str) -> FastMCP:
    mcp = FastMCP(kind, instructions=INSTRUCTIONS[kind])

    @mcp.tool
    def search(place: str) -> str:
        """Search listings by place."""
        return f"no {kind} listings in {place}"

    @mcp.tool
    def details(listing_id: str) -> str:
        """Details of one listing."""
        return f"{kind} listing {listing_id}"

    return mcp


if __name__ == "__main__":
    build(sys.argv[1] if len(sys.argv) > 1 else "lodging").run(show_banner=False)
