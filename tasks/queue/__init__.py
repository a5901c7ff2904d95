"""The queue: its order (order: priority, fair share, arrival), the scheduler's copy of its rows
kept between ticks (rows), the queue as people read it in the API and on the queue page (read)
and each waiting task's note in words (notes). The scheduler calls into it."""
