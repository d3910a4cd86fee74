# PyTorch's "Datasets & DataLoaders" and "Transforms" pages of Learn the Basics on files made
# here: a custom Dataset reading an annotations CSV and one image file per sample (NumPy .npy
# in place of decode_image on PNGs), a ToTensor-like transform and the Lambda one-hot target
# transform written out (torchvision is not used), then a shuffled DataLoader.
# (``from torch.utils.data import ...`` spelled as attributes: the test swaps ``import torch`` only.)
import csv
import os
import tempfile

import numpy as np
import torch

Dataset, DataLoader = torch.utils.data.Dataset, torch.utils.data.DataLoader

labels_map = {
    0: "T-Shirt", 1: "Trouser", 2: "Pullover", 3: "Dress", 4: "Coat",
    5: "Sandal", 6: "Shirt", 7: "Sneaker", 8: "Bag", 9: "Ankle Boot",
}


def read_csv(path):
    with open(path, newline="") as file:
        return [(name, int(label)) for name, label in csv.reader(file)]


class CustomImageDataset(Dataset):
    def __init__(self, annotations_file, img_dir, transform=None, target_transform=None):
        self.img_labels = read_csv(annotations_file)
        self.img_dir = img_dir
        self.transform = transform
        self.target_transform = target_transform

    def __len__(self):
        return len(self.img_labels)

    def __getitem__(self, idx):
        img_path = os.path.join(self.img_dir, self.img_labels[idx][0])
        image = torch.from_numpy(np.load(img_path))
        label = self.img_labels[idx][1]
        if self.transform:
            image = self.transform(image)
        if self.target_transform:
            label = self.target_transform(label)
        return image, label


def ToTensor():
    """An HxWxC uint8 image as a CxHxW float tensor in [0, 1]."""
    return lambda image: image.permute(2, 0, 1).float() / 255


def Lambda(function):
    return function


target_transform = Lambda(lambda y: torch.zeros(10, dtype=torch.float).scatter_(0, torch.tensor(y), value=1))

rng = np.random.default_rng(0)
with tempfile.TemporaryDirectory() as img_dir:
    annotations_file = os.path.join(img_dir, "labels.csv")
    with open(annotations_file, "w", newline="") as file:
        writer = csv.writer(file)
        for i in range(40):
            name = f"img{i}.npy"
            np.save(os.path.join(img_dir, name), rng.integers(0, 256, (28, 28, 1), dtype=np.uint8))
            writer.writerow([name, int(rng.integers(0, 10))])

    training_data = CustomImageDataset(annotations_file, img_dir)
    image, label = training_data[3]
    print(image.shape, image.dtype, labels_map[label])

    train_dataloader = DataLoader(training_data, batch_size=8, shuffle=True)
    # Display image and label.
    train_features, train_labels = next(iter(train_dataloader))
    print(f"Feature batch shape: {train_features.size()}")
    print(f"Labels batch shape: {train_labels.size()}")
    img = train_features[0].squeeze()
    label = train_labels[0]
    print(img.shape, img[0, :6])
    print(f"Label: {label}")

    ds = CustomImageDataset(annotations_file, img_dir, transform=ToTensor(), target_transform=target_transform)
    image, target = ds[5]
    print(image.shape, image.dtype, image.max(), target)
    loader = DataLoader(ds, batch_size=8, shuffle=True)
    for features, targets in loader:
        print(features.shape, features.mean(), targets.sum(0))
