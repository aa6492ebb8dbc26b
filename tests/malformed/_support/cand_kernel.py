def scale(x, alpha, y):
    y.copy_(x * alpha)
