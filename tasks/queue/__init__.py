"""The queue: its order (order: priority, fair share, arrival; fairshare the pure rule, shares
each user's decayed usage and factor now), what a waiting task asks of the cluster (request),
the scheduler's copy of its rows kept between ticks (rows), the queue as people read it in the
API and on the queue page (read) and each waiting task's note in words (notes). The scheduler
calls into it; it imports nothing from the scheduler."""
