"""Reading and handling source code: symbol spans, trees and patches, the coverage map, imports, host-side git, leak and exposure checks."""
