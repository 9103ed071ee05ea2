"""From chunk schedules to runtime programs: dependencies, instances, lane balancing, threadblock lowering."""
